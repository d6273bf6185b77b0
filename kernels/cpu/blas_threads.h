// OpenBLAS threading inside OpenMP regions.
//
// The OpenBLAS build here runs its own thread pool. An op that already spreads GEMMs over
// OpenMP threads must make each GEMM single-threaded, or the two pools oversubscribe the
// cores and OpenBLAS serialises concurrent callers.
#pragma once

#include <cblas.h>

namespace ustrain::cpu {

// Makes OpenBLAS single-threaded for its lifetime; restores the previous count after.
class SingleThreadedBlas {
 public:
  SingleThreadedBlas() : saved_(openblas_get_num_threads()) {
    if (saved_ != 1) openblas_set_num_threads(1);
  }
  ~SingleThreadedBlas() {
    if (saved_ != 1) openblas_set_num_threads(saved_);
  }
  SingleThreadedBlas(const SingleThreadedBlas&) = delete;
  SingleThreadedBlas& operator=(const SingleThreadedBlas&) = delete;

 private:
  int saved_;
};

}  // namespace ustrain::cpu
