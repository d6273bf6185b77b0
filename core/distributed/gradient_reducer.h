// Data-parallel gradient reduction in buckets, launched while backward is still running.
//
// Parameter gradients live in one arena (a ParamStore). The reducer cuts it into buckets of
// consecutive parameters (about `bucket_bytes` each, in memory order) and, as the model's
// backward announces that a parameter's gradient is complete, launches an asynchronous
// all-reduce (sum) of every bucket whose parameters are all complete. Every rank's backward
// announces parameters in the same order, so every rank launches buckets in the same order,
// which collective semantics require. finish() waits for all of them.
#pragma once

#include <cstddef>
#include <vector>

#include "core/model/param_store.h"
#include "parallel/comm/communicator.h"

namespace ustrain {

class GradientReducer {
 public:
  GradientReducer(const ParamStore& store, Communicator& group, std::size_t bucket_bytes);

  // Arms the reducer for the next backward (call it only for the micro-batch that completes
  // the gradient accumulation; the others accumulate locally).
  void begin();
  // The model's grad-ready hook.
  void on_grad_ready(int param);
  // Launches what is left and waits for every bucket; gradients are then the group's sum.
  void finish();

  std::size_t bucket_count() const { return buckets_.size(); }
  // Seconds finish() spent waiting in the last step: the reduction time not hidden by backward.
  double exposed_seconds() const { return exposed_seconds_; }

 private:
  struct Bucket {
    Tensor grads;  // a contiguous range of the gradient arena
    int params = 0;
    int ready = 0;
    bool launched = false;
    Work work;
  };
  void launch(Bucket& b);

  Communicator& group_;
  std::vector<Bucket> buckets_;
  std::vector<int> bucket_of_;  // parameter handle -> bucket index
  bool armed_ = false;
  double exposed_seconds_ = 0;
};

}  // namespace ustrain
