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
  USTRAIN_ASSERT(states_.count(key) == 0 && names_.count(name) == 0, "fp8 scaling state " + name + " added twice");
  auto state = std::make_unique<LayerScaling>(config_);
  names_[name] = state.get();
  states_[key] = std::move(state);
}

LayerScaling* Fp8Layers::find(const void* key) {
  const auto it = states_.find(key);
  return it == states_.end() ? nullptr : it->second.get();
}

std::map<std::string, LayerScaling*> Fp8Layers::by_name() {
  if (config_.recipe != Recipe::delayed) return {};
  return names_;
}

void Fp8Layers::begin_step() {
  for (auto& [key, state] : states_) state->drop_pending();
  if (amax_source_ != nullptr) amax_source_->discard();
  ++generation_;
}

void Fp8Layers::end_step() {
  for (auto& [key, state] : states_) state->end_step(config_);
  ++generation_;
}

}  // namespace ustrain::fp8
