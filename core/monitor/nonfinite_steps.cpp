#include "core/monitor/nonfinite_steps.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <charconv>
#include <cmath>
#include <cstdlib>
#include <string_view>

#include "kernels/error.h"

namespace ustrain {
namespace {

std::int64_t step_number(std::string_view text, const char* spec) {
  std::int64_t value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || value < 1)
    throw UserError(fmt::format("USTRAIN_TEST_NONFINITE_STEPS='{}' is not a list of steps such as 3,5-7", spec));
  return value;
}

}  // namespace

NonfiniteSteps::NonfiniteSteps(std::int64_t max_in_a_row)
    : NonfiniteSteps(max_in_a_row, std::getenv("USTRAIN_TEST_NONFINITE_STEPS")) {}

NonfiniteSteps::NonfiniteSteps(std::int64_t max_in_a_row, const char* test_steps) : max_in_a_row_(max_in_a_row) {
  USTRAIN_ASSERT(max_in_a_row >= 1, "train.max_bad_steps must be at least 1");
  if (test_steps == nullptr) return;
  std::string_view rest(test_steps);
  for (;;) {
    const std::size_t comma = rest.find(',');
    const std::string_view item = rest.substr(0, comma);
    const std::size_t dash = item.find('-');
    const std::int64_t first = step_number(item.substr(0, dash), test_steps);
    const std::int64_t last = dash == std::string_view::npos ? first : step_number(item.substr(dash + 1), test_steps);
    poisoned_.emplace_back(first, last);
    if (comma == std::string_view::npos) break;
    rest = rest.substr(comma + 1);
  }
}

double NonfiniteSteps::loss(std::int64_t step, double loss) const {
  for (const auto& [first, last] : poisoned_)
    if (step >= first && step <= last) return std::nan("");
  return loss;
}

bool NonfiniteSteps::bad(double loss, double grad_sum_of_squares, bool loss_scaling) {
  return !std::isfinite(loss) || (!loss_scaling && !std::isfinite(grad_sum_of_squares));
}

void NonfiniteSteps::count(std::int64_t step, bool bad, double loss, double grad_norm) {
  if (!bad) {
    if (in_a_row_ > 0) spdlog::info("step {}: finite again after {} skipped step(s)", step, in_a_row_);
    in_a_row_ = 0;
    return;
  }
  ++in_a_row_;
  ++total_;
  last_loss_ = loss;
  last_grad_norm_ = grad_norm;
  if (in_a_row_ < max_in_a_row_)
    spdlog::warn("step {}: the loss is {} and the gradient norm {}: skipped the update ({} in a row; training stops "
                 "at train.max_bad_steps = {})",
                 step, loss, grad_norm, in_a_row_, max_in_a_row_);
}

void NonfiniteSteps::stop_if_too_many(std::int64_t step, const std::string& newest_checkpoint) const {
  if (in_a_row_ < max_in_a_row_) return;
  const std::string what = fmt::format(
      "training stopped at step {}: the last {} steps had a non-finite loss or gradient norm (the last: loss {}, "
      "gradient norm {}; train.max_bad_steps = {}); none of them changed the model or wrote a checkpoint",
      step, in_a_row_, last_loss_, last_grad_norm_, max_in_a_row_);
  const char* fix = "Lower optim.lr, raise schedule.warmup_steps or lower train.grad_clip";
  if (newest_checkpoint.empty())
    throw UserError(fmt::format("{}, and the run has no checkpoint to go back to. {}, then start the run again "
                                "(--overwrite)",
                                what, fix));
  throw UserError(fmt::format("{}, so the newest checkpoint holds the last good state ({}). {}, then resume with "
                              "--resume auto (and --force-resume for optimizer changes)",
                              what, newest_checkpoint, fix));
}

}  // namespace ustrain
