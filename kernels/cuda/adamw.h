// Multi-tensor AdamW on the GPU: every parameter tensor is updated in a few launches.
// Same formula as the CPU op (kernels/cpu/cpu_backend.cpp): bias-corrected moments and
// decoupled weight decay, all in fp32.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/tensor.h"

namespace ustrain::cuda {

// One parameter tensor: fp32 master weights, gradient and moments, n elements each.
struct AdamWSegment {
  float* param;
  const float* grad;
  float* m;
  float* v;
  std::int64_t n;
  float weight_decay;
  // Null, or where to also write the updated weights in the compute dtype (the copy the
  // model computes with), fusing the master -> compute conversion into the update.
  void* compute_copy;
};

struct AdamWHyper {
  float lr, beta1, beta2, eps;
  std::int64_t step;        // 1-based, for bias correction
  float grad_scale = 1.0f;  // multiplies every gradient as it is read
};

// Updates every segment. `segments` is a HOST array of `count` entries (device pointers
// inside); compute_dtype (f32, bf16 or f16) is the dtype of every compute_copy.
void adamw(const AdamWSegment* segments, int count, const AdamWHyper& h, DType compute_dtype, cudaStream_t stream);

}  // namespace ustrain::cuda
