#include "data/tokenizers/regex_budget.h"

#include <time.h>

#include <algorithm>

namespace ustrain {
namespace {

constexpr unsigned kAttemptsPerClockCheck = 16;

double thread_cpu_seconds() {
  timespec now{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
  return static_cast<double>(now.tv_sec) + static_cast<double>(now.tv_nsec) * 1e-9;
}

}  // namespace

RegexBudget::RegexBudget(std::size_t document_bytes, const RegexLimits& limits)
    : seconds_(std::min(limits.max_cpu_seconds,
                        limits.cpu_seconds + limits.cpu_seconds_per_mib * static_cast<double>(document_bytes) / (1 << 20))) {}

bool RegexBudget::attempt() {
  if (++attempts_ % kAttemptsPerClockCheck != 0) return true;
  const double now = thread_cpu_seconds();
  if (started_ < 0) started_ = now;
  return now - started_ <= seconds_;
}

}  // namespace ustrain
