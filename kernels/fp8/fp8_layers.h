// The linear layers whose GEMMs compute in FP8, and their scaling state.
//
// Delayed scaling (TransformerEngine's default recipe): each FP8 operand of a linear layer's
// GEMMs is scaled with a scale computed from the amaxes of earlier steps. Within a step the
// scale is fixed and the operand's amax is recorded (the largest over the step's calls:
// micro-batches, recomputed forwards); at the step's end it enters a history of `history`
// steps and the next scale is scale_for_amax(max of the history, format, margin, scale), so a
// step's amax counts at once and for `history` steps.
//
// A state belongs to its layer (its name); a GEMM finds it by the tensor it names the layer
// with: forward and input-gradient GEMMs by their weight, the weight-gradient GEMM by the
// weight's gradient. ZeRO-2 and -3 move these into reused buffers during a step, so whoever
// binds them there rebinds the state's key (rebind), and a state is the same on every layout.
// Each state holds the three operands of its layer's GEMMs (activation, weight,
// gradient) as one flat fp32 tensor, which checkpoints save under the state's name:
//   per role, in Role order: [scale, next history slot, history (history floats)].
// Keys that nobody added (the output head, a router, a GEMM outside training) compute in
// bf16. The other recipes keep no state: their layers are only keys.
#pragma once

#include <array>
#include <cmath>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "kernels/fp8/fp8_scaling.h"

namespace ustrain::fp8 {

class LayerScaling {
 public:
  explicit LayerScaling(const Config& c);  // no values unless the recipe is delayed
  static std::int64_t floats(const Config& c) {
    return c.recipe == Recipe::delayed ? kRoles * (c.history + 2) : 0;
  }

  float scale(Role r) const { return values_[offset(r)]; }
  void record(Role r, float amax) {
    float& p = pending_[static_cast<std::size_t>(r)];
    p = std::fmax(p, amax);
  }
  // The step's amaxes into the histories, the next scales from them.
  void end_step(const Config& c);
  void drop_pending() { pending_.fill(0.0f); }
  std::array<float, kRoles>& pending() { return pending_; }
  std::vector<float>& values() { return values_; }

 private:
  std::size_t offset(Role r) const { return static_cast<std::size_t>(r) * static_cast<std::size_t>(history_ + 2); }
  int history_;
  std::vector<float> values_;
  std::array<float, kRoles> pending_{};
};

class Fp8Layers;

// Where a backend keeps the step's amaxes while its GEMMs run off the host (a GPU): dropped
// when a step begins, and recorded into the states' pending() when asked, once per step.
class AmaxSource {
 public:
  virtual ~AmaxSource() = default;
  virtual void discard() = 0;
  virtual void record_into(Fp8Layers& layers) = 0;
};

// A backend's FP8 linear layers.
class Fp8Layers {
 public:
  explicit Fp8Layers(const Config& c) : config_(c) {}
  const Config& config() const { return config_; }

  // The GEMMs that name the tensor at `key` compute in FP8, with a new state named `name`.
  void add(const void* key, const std::string& name);
  // State `name`'s GEMMs now name the tensor at `key` (its layer moved into a buffer): its
  // previous key, and whichever state held `key` before (the buffer's previous layer), no
  // longer find it. A null key leaves the state without one.
  void rebind(const void* key, const std::string& name);
  // GEMMs naming the tensor at `key` compute in bf16 again (a parameter that is not an FP8
  // layer moved into the buffer there).
  void forget(const void* key);
  // The state of `key`'s GEMMs; null when they do not compute in FP8.
  LayerScaling* find(const void* key);
  // Every delayed-scaling state by name, in name order (what checkpoints hold); none for
  // the other recipes.
  std::map<std::string, LayerScaling*> by_name();
  std::int64_t count() const { return static_cast<std::int64_t>(states_.size()); }

  void begin_step();  // forgets amaxes recorded outside training steps (validation)
  void end_step();

  // The step's amaxes that the backend holds elsewhere into pending() (before end_step).
  void collect_amaxes() {
    if (amax_source_ != nullptr) amax_source_->record_into(*this);
  }
  void set_amax_source(AmaxSource* source) { amax_source_ = source; }
  // Changes whenever a step begins or ends, so the scales may have changed (new ones after a
  // step, loaded ones before the first): a backend holding copies refreshes them.
  std::uint64_t generation() const { return generation_; }

 private:
  Config config_;
  std::map<std::string, std::unique_ptr<LayerScaling>> states_;  // by name
  std::map<const void*, LayerScaling*> by_key_;
  std::map<const LayerScaling*, const void*> key_of_;
  AmaxSource* amax_source_ = nullptr;
  std::uint64_t generation_ = 0;
};

}  // namespace ustrain::fp8
