#include "kernels/fp8/fp8_layers.h"

#include <algorithm>

#include "kernels/error.h"

namespace ustrain::fp8 {

LayerScaling::LayerScaling(const Config& c)
    : history_(c.history), values_(static_cast<std::size_t>(floats(c)), 0.0f) {
  USTRAIN_ASSERT(c.history >= 1, "an amax history holds at least one step");
  if (values_.empty()) return;
  for (int r = 0; r < kRoles; ++r) values_[offset(static_cast<Role>(r))] = 1.0f;  // TransformerEngine's first scale
}

void LayerScaling::end_step(const Config& c) {
  if (values_.empty()) return;
  for (int i = 0; i < kRoles; ++i) {
    const auto role = static_cast<Role>(i);
    float* state = values_.data() + offset(role);
    float* history = state + 2;
    auto slot = static_cast<std::int64_t>(state[1]);
    history[slot] = pending_[static_cast<std::size_t>(i)];
    state[1] = static_cast<float>((slot + 1) % history_);
    const float amax = *std::max_element(history, history + history_);
    state[0] = scale_for_amax(amax, format_of(c, role), c.margin, state[0]);
  }
  drop_pending();
}

void Fp8Layers::add(const void* key, const std::string& name) {
  USTRAIN_ASSERT(states_.count(name) == 0, "fp8 scaling state " + name + " added twice");
  states_[name] = std::make_unique<LayerScaling>(config_);
  rebind(key, name);
}

void Fp8Layers::rebind(const void* key, const std::string& name) {
  const auto state = states_.find(name);
  USTRAIN_ASSERT(state != states_.end(), "no fp8 scaling state " + name);
  LayerScaling* s = state->second.get();
  if (const auto old = key_of_.find(s); old != key_of_.end()) {
    const auto held = by_key_.find(old->second);
    if (held != by_key_.end() && held->second == s) by_key_.erase(held);  // else another layer took it
    key_of_.erase(old);
  }
  if (key == nullptr) return;
  forget(key);
  by_key_[key] = s;
  key_of_[s] = key;
}

void Fp8Layers::forget(const void* key) {
  const auto held = by_key_.find(key);
  if (held == by_key_.end()) return;
  key_of_.erase(held->second);
  by_key_.erase(held);
}

LayerScaling* Fp8Layers::find(const void* key) {
  const auto it = by_key_.find(key);
  return it == by_key_.end() ? nullptr : it->second;
}

std::map<std::string, LayerScaling*> Fp8Layers::by_name() {
  std::map<std::string, LayerScaling*> out;
  if (config_.recipe != Recipe::delayed) return out;
  for (const auto& [name, state] : states_) out[name] = state.get();
  return out;
}

void Fp8Layers::begin_step() {
  for (auto& [name, state] : states_) state->drop_pending();
  if (amax_source_ != nullptr) amax_source_->discard();
  ++generation_;
}

void Fp8Layers::end_step() {
  for (auto& [name, state] : states_) state->end_step(config_);
  ++generation_;
}

}  // namespace ustrain::fp8
