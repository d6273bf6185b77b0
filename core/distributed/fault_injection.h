// Faults injected on purpose, to test what notices them (a testing aid, documented as such):
// USTRAIN_INJECT_FAULT holds one or more comma-separated faults,
//
//   bitflip:rank=R:step=S   after step S's update, rank R flips one bit of one parameter (the
//                           top mantissa bit of the first value it stores: finite, visible)
//   gradflip:rank=R:step=S  the same in the first gradient rank R holds, once step S's gradients
//                           are reduced, before the update (train.replica_check_grads)
//   slow:rank=R:ms=M        rank R sleeps M ms at the start of every step (a slow node)
//
// so that the replica check (core/distributed/replica_check.h) and the straggler report can be
// seen to name the rank. Without the variable nothing happens.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "core/model/params.h"
#include "kernels/backend.h"

namespace ustrain {

class InjectedFaults {
 public:
  // From USTRAIN_INJECT_FAULT; none when it is unset or empty.
  static InjectedFaults from_environment();
  // UserError naming the variable, the fault and the accepted forms when `spec` is malformed.
  static InjectedFaults parse(std::string_view spec);

  // After step `step`'s update on global rank `rank`.
  void after_update(std::int64_t step, int rank, const ModelParams& params, Backend& backend) const;
  // After step `step`'s gradients were reduced, before the update, on global rank `rank`.
  void after_reduction(std::int64_t step, int rank, const ModelParams& params, Backend& backend) const;
  // At the start of every step on global rank `rank`.
  void delay(int rank) const;
  bool empty() const { return flips_.empty() && slow_.empty(); }

 private:
  struct BitFlip {
    int rank = 0;
    std::int64_t step = 0;
    ParamState state = ParamState::value;  // in the parameters or the gradients
  };
  void flip(std::int64_t step, int rank, ParamState state, const ModelParams& params, Backend& backend) const;
  struct Slowdown {
    int rank = 0;
    std::int64_t ms = 0;
  };
  std::vector<BitFlip> flips_;
  std::vector<Slowdown> slow_;
};

}  // namespace ustrain
