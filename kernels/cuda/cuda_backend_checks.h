// The argument checks every CudaBackend op starts with: device, dtype and the one activation
// dtype of a call. Internal to kernels/cuda/cuda_backend*.cpp.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>

#include "kernels/error.h"
#include "kernels/tensor.h"

namespace ustrain::cuda {

inline bool is_act(DType t) { return t == DType::f32 || t == DType::bf16 || t == DType::f16; }

inline void expect_device(const Tensor& t, const char* what) {
  USTRAIN_ASSERT(t.device == Device::cuda && t.data != nullptr,
                 std::string(what) + " must be a cuda tensor, got " + device_name(t.device));
}

inline void expect_f32(const Tensor& t, const char* what) {
  expect_device(t, what);
  USTRAIN_ASSERT(t.dtype == DType::f32, std::string(what) + " must be f32, got " + dtype_name(t.dtype));
}

inline void expect_i32(const Tensor& t, const char* what) {
  expect_device(t, what);
  USTRAIN_ASSERT(t.dtype == DType::i32, std::string(what) + " must be i32, got " + dtype_name(t.dtype));
}

// The activation dtype of a call: `lead` decides it, `others` must share it.
inline DType act_of(const char* op, std::initializer_list<const Tensor*> tensors) {
  const Tensor& lead = **tensors.begin();
  USTRAIN_ASSERT(is_act(lead.dtype), std::string(op) + ": activations must be f32, bf16 or f16, got " +
                                         dtype_name(lead.dtype));
  for (const Tensor* t : tensors) {
    expect_device(*t, op);
    USTRAIN_ASSERT(t->dtype == lead.dtype, std::string(op) + ": mixes " + dtype_name(lead.dtype) + " and " +
                                               dtype_name(t->dtype) + " activations");
  }
  return lead.dtype;
}

// The activation dtype of a cross-entropy backward (whole or shard), after checking dlogits
// against logits and one fp32 lse and i32 target per row; `what` names it in messages.
inline DType check_cross_entropy_backward(const char* op, const char* what, const Tensor& dlogits, const Tensor& logits,
                                          const Tensor& lse, const Tensor& targets) {
  const DType act = act_of(op, {&logits, &dlogits});
  expect_f32(lse, "cross-entropy lse");
  expect_i32(targets, "cross-entropy targets");
  const std::int64_t rows = logits.shape.rows();
  USTRAIN_ASSERT(dlogits.shape == logits.shape && lse.numel() == rows && targets.numel() == rows,
                 std::string(what) + ": logits " + logits.shape.str() + ", dlogits " + dlogits.shape.str());
  return act;
}

}  // namespace ustrain::cuda
