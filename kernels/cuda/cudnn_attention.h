// Causal grouped-query flash attention through cuDNN's fused kernels, for bf16 and f16.
//
// Computes exactly what kernels/cpu/cpu_attention.cpp computes (softmax scale 1/sqrt(Dh),
// query head h reads kv head h / (H / Hkv), lse the natural-log statistic of the scaled
// scores), reading and writing the fused buffers in place (kernels/cuda/attention_layout.h).
//
// forward and backward return false, doing nothing, when the caller's own kernel should run:
//   - the shape is outside cudnn_supports() (cuDNN must refuse it): our kernel runs it, even
//     under `require_cudnn`; logged once per shape (info; debug for fp32, which never asks);
//   - cuDNN refused a shape inside it (no engine; remembered, so later calls return at once)
//     or a buffer is not 16-byte aligned: a warning once per shape with the reason, and with
//     `require_cudnn` (USTRAIN_REQUIRE_CUDNN=1) an error instead of the fallback.
// Before cuDNN 9.6 the backward's fp32 dQ accumulator is zeroed here (a memset per call).
// Any other cuDNN failure throws, naming the call and cuDNN's status.
//
// A shape's first call builds and caches its execution plan (cuDNN may compile kernels
// then: seconds, once). One device workspace serves every plan; it is reallocated only when
// a new plan needs more, so only in the first step. Calls are asynchronous on `stream`.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <memory>

#include "kernels/tensor.h"

namespace ustrain::cuda {

class CudnnAttention {
 public:
  // Creates the cuDNN handle: needs a GPU, with the device the calls will use current.
  explicit CudnnAttention(bool require_cudnn);
  ~CudnnAttention();
  CudnnAttention(const CudnnAttention&) = delete;
  CudnnAttention& operator=(const CudnnAttention&) = delete;

  // qkv (B, S, (H + 2 Hkv) Dh) -> out (B, S, H Dh), lse (B, H, S) fp32.
  bool forward(void* out, float* lse, const void* qkv, std::int64_t B, std::int64_t S, int H, int Hkv, int Dh,
               DType act, cudaStream_t stream);
  // dqkv (B, S, (H + 2 Hkv) Dh) overwritten from dout (B, S, H Dh), qkv, out and lse.
  bool backward(void* dqkv, const void* dout, const void* qkv, const void* out, const float* lse, std::int64_t B,
                std::int64_t S, int H, int Hkv, int Dh, DType act, cudaStream_t stream);

  // Device workspace held now, in bytes (for the memory report).
  std::size_t workspace_bytes() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ustrain::cuda
