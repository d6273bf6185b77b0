// Per-layer spans without touching the model: the model's announcements of parameter use
// (core/model/param_hooks.h) pass through here to the engine that acts on them, and while the
// tracer records, each unit's use becomes a span on the training loop's track, from its
// acquire (once the engine made its values ready: a ZeRO-3 gather's wait stays outside, on
// the communicator's track) to its release, named for its unit (the embedding, a layer,
// the head; a last stage's copy of a tied embedding counts as the head). A weight-gradient pass (zero-bubble) announces no
// uses, so it shows as one span per action, without layers. While recording, a span ends by
// synchronizing the device: on a GPU it shows when the layer's kernels finished, not when
// they were queued (this takes the host's run-ahead away in the traced steps only).
#pragma once

#include <vector>

#include "core/model/param_hooks.h"
#include "kernels/backend.h"
#include "parallel/comm/trace.h"

namespace ustrain {

class LayerTraceHooks final : public ParamUseHooks {
 public:
  LayerTraceHooks(ParamUseHooks& inner, Tracer& tracer, Backend& backend)
      : inner_(inner), tracer_(tracer), backend_(backend) {}

  void acquire(UnitId unit, bool backward) override;
  void release(UnitId unit) override;
  void grads_done(UnitId unit) override { inner_.grads_done(unit); }

 private:
  struct Open {
    UnitId unit;
    bool backward;
    Tracer::Clock::time_point begin;
  };

  ParamUseHooks& inner_;
  Tracer& tracer_;
  Backend& backend_;
  std::vector<Open> open_;  // uses nest: the head holds a tied embedding inside it
};

}  // namespace ustrain
