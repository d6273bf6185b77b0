// The device scratch the CUDA backend takes for each op of a recorded step, worked out without
// a GPU from the op's recorded shapes, dtypes and integer arguments, through the same size
// functions the CUDA code asks its scratch with (kernels/cuda/scratch_sizes.h,
// kernels/cuda/attention/attention_layout.h). The memory plan's op-scratch line is the largest over the
// step's ops (core/plan/step_scratch.h): ops run one at a time on the compute stream, so one
// arena serves them all.
//
// Attention may run through cuDNN or our kernel (cuDNN may refuse a shape it should take, or
// a misaligned buffer), so an op counts the larger of the two. cuDNN's own execution-plan
// workspace is not here: only the device knows it (CudaBackend::op_scratch_bytes adds it).
#pragma once

#include <cstddef>
#include <optional>

#include "kernels/cuda/attention/attention_layout.h"
#include "kernels/record/recording_backend.h"

namespace ustrain {

// An attention op of a recorded step, as the CUDA backend sees it.
struct RecordedAttention {
  bool block = false;     // packed keys: block_dims; else a self block, whole
  bool backward = false;
  DType act = DType::f32;
  bool cudnn_offered = false;  // inside cudnn_supports / cudnn_block_supports
  cuda::AttentionDims whole;
  cuda::BlockAttentionDims block_dims;
};

// The attention op `op` is (attention_block_forward, _backward), or nullopt for any other op.
std::optional<RecordedAttention> recorded_attention(const RecordedOp& op);

// Bytes of op scratch the CUDA backend takes for `op`, cuDNN's plan workspace aside.
std::size_t cuda_op_scratch_bytes(const RecordedOp& op);

// Bytes of op scratch the CPU backend with 16-bit storage (kernels/cpu/cpu_mixed_backend.h)
// takes for `op`: an fp32 stand-in for each of its bf16 / fp16 tensors, each starting on a
// kCpuWideningAlign boundary. 0 for the ops it does not widen.
inline constexpr std::size_t kCpuWideningAlign = 64;
std::size_t cpu_widening_bytes(const RecordedOp& op);

}  // namespace ustrain
