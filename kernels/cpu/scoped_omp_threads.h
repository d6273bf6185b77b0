// OpenMP's thread count for the calling thread, set for a scope and restored after it: for
// code that parallelises with OpenMP's default team (oneDNN, the FP8 emulation) run by a
// backend told to use fewer threads than the host has.
#pragma once

#include <omp.h>

namespace ustrain::cpu {

class ScopedOmpThreads {
 public:
  // threads <= 0 leaves OpenMP's setting as it is.
  explicit ScopedOmpThreads(int threads) : previous_(omp_get_max_threads()), set_(threads > 0) {
    if (set_) omp_set_num_threads(threads);
  }
  ~ScopedOmpThreads() {
    if (set_) omp_set_num_threads(previous_);
  }
  ScopedOmpThreads(const ScopedOmpThreads&) = delete;
  ScopedOmpThreads& operator=(const ScopedOmpThreads&) = delete;

 private:
  int previous_;
  bool set_;
};

}  // namespace ustrain::cpu
