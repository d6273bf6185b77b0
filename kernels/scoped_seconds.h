// ScopedSeconds: adds the wall-clock seconds of its scope to a counter (time a rank's host spent
// in a kind of work, summed over a step for its metrics).
#pragma once

#include <chrono>

namespace ustrain {

class ScopedSeconds {
 public:
  explicit ScopedSeconds(double& seconds) : seconds_(seconds), start_(std::chrono::steady_clock::now()) {}
  ~ScopedSeconds() { seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count(); }
  ScopedSeconds(const ScopedSeconds&) = delete;
  ScopedSeconds& operator=(const ScopedSeconds&) = delete;

 private:
  double& seconds_;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace ustrain
