// Steps whose loss or gradient norm is not finite (NaN or infinite). Such a step is skipped:
// the weights, the optimizer state and the loss scale stay as they were. It is counted and
// logged, the trainer saves no periodic checkpoint while a streak of them lasts, and
// train.max_bad_steps of them in a row stop training with an error, so that the newest
// checkpoint holds the last good state.
//
// Every rank takes the same decision without a collective of its own: the loss has been
// summed over the ranks that see different tokens (the tensor-parallel ranks of a group compute
// the same sum) and the squared gradient norm over the whole world, and a NaN or infinity in
// any rank's term makes the sum non-finite on every rank.
//
// With fp16 loss scaling, gradients that overflow are the loss scaler's business
// (core/step/loss_scaler.h: skip, lower the scale, go on) and not a bad step; a non-finite loss is.
//
// Test hook: USTRAIN_TEST_NONFINITE_STEPS="3,5-7" makes this rank's share of the losses of
// those steps NaN before the ranks sum them, as if its forward pass had overflowed; without it,
// nothing happens.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace ustrain {

class NonfiniteSteps {
 public:
  // Reads the test hook from the environment.
  explicit NonfiniteSteps(std::int64_t max_in_a_row);
  NonfiniteSteps(std::int64_t max_in_a_row, const char* test_steps);

  // This rank's loss sum of the step as the trainer sees it: NaN on a step the test hook names.
  double loss(std::int64_t step, double loss) const;
  // Whether the step must be skipped.
  static bool bad(double loss, double grad_sum_of_squares, bool loss_scaling);

  // After each step: a bad one is counted and logged; a good one ends the streak.
  void count(std::int64_t step, bool bad, double loss, double grad_norm);
  // UserError when the last max_in_a_row steps were all bad; it names `newest_checkpoint`
  // (the last good state) or, when empty, says that there is none.
  void stop_if_too_many(std::int64_t step, const std::string& newest_checkpoint) const;
  std::int64_t in_a_row() const { return in_a_row_; }
  std::int64_t total() const { return total_; }  // since this process started

 private:
  std::int64_t max_in_a_row_;
  std::int64_t in_a_row_ = 0, total_ = 0;
  double last_loss_ = 0, last_grad_norm_ = 0;
  std::vector<std::pair<std::int64_t, std::int64_t>> poisoned_;  // inclusive step ranges
};

}  // namespace ustrain
