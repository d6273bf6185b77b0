// Grouped-query flash attention through cuDNN's fused kernels, for bf16 and f16: over the whole
// causal sequence, and over one block of it (attention over blocks of the sequence), either
// with a sliding window (cuDNN 9.2 on). Document ids are never offered (kernels/README.md).
//
// Computes exactly what kernels/cpu/cpu_attention.cpp computes (softmax scale 1/sqrt(Dh),
// query head h reads kv head h / (H / Hkv), lse the natural-log statistic of the scaled
// scores), reading and writing the fused buffers in place (kernels/cuda/attention/attention_layout.h).
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
// A shape's first call, or scratch_bytes() for it, builds and caches its execution plan (cuDNN
// may compile kernels then: seconds, once). Each call takes its scratch (our staging ahead of
// the plan's own workspace) from the backend's op scratch through `take_scratch`, so the op
// scratch a memory plan holds covers cuDNN too. Calls are asynchronous on `stream`.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "kernels/cuda/attention/attention_layout.h"
#include "kernels/tensor.h"

namespace ustrain::cuda {

class CudnnAttention {
 public:
  // Device scratch of at least `bytes` for the call `what` names, valid until the next call.
  using TakeScratch = std::function<void*(std::size_t bytes, const std::string& what)>;

  // Creates the cuDNN handle: needs a GPU, with the device the calls will use current.
  CudnnAttention(bool require_cudnn, TakeScratch take_scratch);
  ~CudnnAttention();
  CudnnAttention(const CudnnAttention&) = delete;
  CudnnAttention& operator=(const CudnnAttention&) = delete;

  // qkv (B, S, (H + 2 Hkv) Dh) -> out (B, S, H Dh), lse (B, H, S) fp32; causal, and with a
  // window > 0 query i sees only keys i - j < window (0 for none, or one spanning S).
  bool forward(void* out, float* lse, const void* qkv, std::int64_t B, std::int64_t S, int H, int Hkv, int Dh,
               std::int64_t window, DType act, cudaStream_t stream);
  // dqkv (B, S, (H + 2 Hkv) Dh) overwritten from dout (B, S, H Dh), qkv, out and lse.
  bool backward(void* dqkv, const void* dout, const void* qkv, const void* out, const float* lse, std::int64_t B,
                std::int64_t S, int H, int Hkv, int Dh, std::int64_t window, DType act, cudaStream_t stream);

  // One block of attention over blocks of the sequence (kernels/cuda/attention/attention_layout.h's
  // BlockAttentionDims; cudnn_block_supports() says which), query rows from q_begin of qkv and
  // key rows from k_begin of kv: out (B, q_rows, H Dh) fp32 and lse (B, H, q_rows) fp32. cuDNN
  // writes O in act (scratch) and it is widened into out, so out carries act's rounding.
  bool block_forward(float* out, float* lse, const void* qkv, const void* kv, std::int64_t q_begin,
                     std::int64_t k_begin, const BlockAttentionDims& a, DType act, cudaStream_t stream);
  // The block's backward from the merged out and dout (B, Sq, H Dh) in act and lse (B, H, Sq):
  // dq (B, Sq, H Dh) and dkv (B, Skv, 2 Hkv Dh) fp32 += at the block's rows. cuDNN writes the
  // block's dQ, dK, dV in act (scratch), then they are added in. Not deterministic run to run
  // in general (cuDNN's dQ accumulation), unlike our kernel.
  bool block_backward(float* dq, float* dkv, const void* dout, const void* qkv, const void* kv, const void* out,
                      const float* lse, std::int64_t q_begin, std::int64_t k_begin, const BlockAttentionDims& a,
                      DType act, cudaStream_t stream);

  // The scratch a call of the shape takes when cuDNN runs it (our staging and the plan's own
  // workspace), planning the shape now if it is new; 0 when our kernel runs it (outside
  // cudnn_supports, or refused). `backward` picks the pass.
  std::size_t scratch_bytes(const AttentionDims& a, DType act, bool backward);
  std::size_t block_scratch_bytes(const BlockAttentionDims& a, DType act, bool backward);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ustrain::cuda
