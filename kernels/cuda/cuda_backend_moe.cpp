// CudaBackend's mixture-of-experts ops: checks devices, dtypes and shapes (as the CPU
// reference does), then hands raw pointers to the kernels of kernels/cuda/moe.h. Logits,
// rows and their gradients are in the activation dtype; probs, gates, dgates and lse fp32;
// experts i32.
#include <cstdint>
#include <string>

#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_backend_checks.h"
#include "kernels/cuda/moe.h"

namespace ustrain::cuda {
namespace {

// The routing of logits (N, E) into experts and gates (N, k), probs (N, E) and lse (N).
MoeRouteShape route_shape(const char* op, const Tensor& experts, const Tensor& gates, const Tensor& probs,
                          const Tensor& lse, const Tensor& logits, const MoeRouting& routing) {
  expect_i32(experts, "moe experts");
  expect_f32(gates, "moe gates");
  expect_f32(probs, "moe probs");
  expect_f32(lse, "moe lse");
  USTRAIN_ASSERT(logits.shape.rank() == 2, std::string(op) + ": router logits must be (N, E), got " +
                                               logits.shape.str());
  const MoeRouteShape s{logits.shape[0], logits.shape[1], routing.top_k};
  USTRAIN_ASSERT(s.top_k >= 1 && s.top_k <= s.experts, std::string(op) + ": top-" + std::to_string(s.top_k) +
                                                            " of " + std::to_string(s.experts) + " experts");
  USTRAIN_ASSERT(experts.numel() == s.rows * s.top_k && gates.numel() == s.rows * s.top_k &&
                     probs.numel() == s.rows * s.experts && lse.numel() == s.rows,
                 std::string(op) + ": logits " + logits.shape.str() + ", experts " + experts.shape.str() +
                     ", gates " + gates.shape.str() + ", probs " + probs.shape.str() + ", lse " + lse.shape.str());
  return s;
}

// Tokens N and picks k of a combine with out or dout (N, D), rows (N k, D), gates (N, k).
std::int64_t picks_of(const char* op, const Tensor& out, const Tensor& rows, const Tensor& gates) {
  expect_f32(gates, "moe gates");
  const std::int64_t n = out.shape.rows(), dim = out.shape.last(), k = n == 0 ? 0 : gates.numel() / n;
  USTRAIN_ASSERT(gates.numel() == n * k && rows.numel() == n * k * dim && rows.shape.last() == dim,
                 std::string(op) + ": rows " + rows.shape.str() + ", gates " + gates.shape.str() + ", tokens " +
                     out.shape.str());
  return k;
}

}  // namespace

void CudaBackend::moe_route(Tensor experts, Tensor gates, Tensor probs, Tensor lse, Tensor logits,
                            const MoeRouting& routing, Tensor bias) {
  const DType act = act_of("moe_route", {&logits});
  const MoeRouteShape s = route_shape("moe_route", experts, gates, probs, lse, logits, routing);
  if (!bias.empty()) {
    expect_f32(bias, "moe router bias");
    USTRAIN_ASSERT(bias.numel() == s.experts, "moe_route: bias " + bias.shape.str() + " for " +
                                                  std::to_string(s.experts) + " experts");
  }
  cuda::moe_route(static_cast<std::int32_t*>(experts.data), gates.f32(), probs.f32(), lse.f32(), logits.data,
                  bias.empty() ? nullptr : bias.f32(), s, routing.sigmoid, routing.renormalize, act, stream_.get());
}

void CudaBackend::moe_route_backward(Tensor dlogits, Tensor dgates, Tensor logits, Tensor probs, Tensor lse,
                                     Tensor experts, Tensor gates, const MoeRouting& routing, float z_grad,
                                     Tensor seq_grad) {
  const DType act = act_of("moe_route_backward", {&logits, &dlogits});
  const MoeRouteShape s = route_shape("moe_route_backward", experts, gates, probs, lse, logits, routing);
  expect_f32(dgates, "moe dgates");
  USTRAIN_ASSERT(dlogits.shape == logits.shape && dgates.numel() == s.rows * s.top_k,
                 "moe_route_backward: dlogits " + dlogits.shape.str() + ", dgates " + dgates.shape.str() +
                     " for logits " + logits.shape.str() + ", top-" + std::to_string(s.top_k));
  std::int64_t seq_len = 0;
  if (!seq_grad.empty()) {
    expect_f32(seq_grad, "moe sequence gradient");
    const std::int64_t seqs = seq_grad.shape.rows();
    USTRAIN_ASSERT(seqs > 0 && seq_grad.numel() == seqs * s.experts && s.rows % seqs == 0,
                   "moe_route_backward: seq_grad " + seq_grad.shape.str() + " for logits " + logits.shape.str());
    seq_len = s.rows / seqs;
  }
  cuda::moe_route_backward(dlogits.data, dgates.f32(), logits.data, probs.f32(), lse.f32(),
                           static_cast<const std::int32_t*>(experts.data), gates.f32(),
                           seq_grad.empty() ? nullptr : seq_grad.f32(), seq_len, s, routing.sigmoid,
                           routing.renormalize, z_grad, act, stream_.get());
}

void CudaBackend::moe_combine(Tensor out, Tensor rows, Tensor gates) {
  const DType act = act_of("moe_combine", {&out, &rows});
  const std::int64_t k = picks_of("moe_combine", out, rows, gates);
  cuda::moe_combine(out.data, rows.data, gates.f32(), out.shape.rows(), k, out.shape.last(), act, stream_.get());
}

void CudaBackend::moe_combine_backward(Tensor drows, Tensor dgates, Tensor dout, Tensor rows, Tensor gates) {
  const DType act = act_of("moe_combine_backward", {&dout, &rows, &drows});
  const std::int64_t k = picks_of("moe_combine_backward", dout, rows, gates);
  expect_f32(dgates, "moe dgates");
  USTRAIN_ASSERT(drows.numel() == rows.numel() && dgates.numel() == gates.numel(),
                 "moe_combine_backward: drows " + drows.shape.str() + " for rows " + rows.shape.str() +
                     ", dgates " + dgates.shape.str() + " for gates " + gates.shape.str());
  cuda::moe_combine_backward(drows.data, dgates.f32(), dout.data, rows.data, gates.f32(), dout.shape.rows(), k,
                             dout.shape.last(), act, stream_.get());
}

}  // namespace ustrain::cuda
