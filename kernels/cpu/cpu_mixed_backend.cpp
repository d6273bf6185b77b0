#include "kernels/cpu/cpu_mixed_backend.h"

#include <cstdint>
#include <utility>

#include "kernels/cpu/half_convert.h"
#include "kernels/record/op_scratch.h"

namespace ustrain {

// One op's fp32 stand-ins for its 16-bit tensors: inputs widened on the way in, results
// rounded into their tensors by done(). Other tensors (fp32, integer) pass through as they are.
class CpuMixedBackend::Widening {
 public:
  explicit Widening(CpuMixedBackend& be) : be_(be) {}

  Tensor in(const Tensor& t) { return stand_in(t, /*load=*/true, /*store=*/false); }
  Tensor out(const Tensor& t) { return stand_in(t, false, true); }
  Tensor inout(const Tensor& t) { return stand_in(t, true, true); }

  void done() {
    for (int i = 0; i < stored_; ++i) {
      const auto& [target, wide] = results_[static_cast<std::size_t>(i)];
      cpu::narrow(target.data, target.dtype, wide.f32(), wide.numel(), be_.threads());
    }
  }

 private:
  Tensor stand_in(const Tensor& t, bool load, bool store) {
    if (!cpu::is_half(t.dtype)) return t;
    USTRAIN_ASSERT(used_ < kSlots, "a mixed-precision CPU op takes more than " + std::to_string(kSlots) +
                                       " 16-bit tensors");
    const auto n = static_cast<std::size_t>(t.numel());
    Tensor wide(be_.widened(used_++, offset_, n), t.shape, DType::f32);
    if (load) cpu::widen(wide.f32(), t.data, t.dtype, t.numel(), be_.threads());
    if (store) results_[static_cast<std::size_t>(stored_++)] = {t, wide};
    return wide;
  }

  CpuMixedBackend& be_;
  int used_ = 0, stored_ = 0;
  std::size_t offset_ = 0;  // into the planned op scratch
  std::array<std::pair<Tensor, Tensor>, kSlots> results_;  // (16-bit tensor, its fp32 stand-in): no allocation
};

CpuMixedBackend::CpuMixedBackend(int threads) : CpuBackend(threads) {}

std::size_t CpuMixedBackend::op_scratch_bytes(const RecordedOp& op) { return cpu_widening_bytes(op); }

void CpuMixedBackend::use_op_scratch(void* scratch, std::size_t bytes) {
  scratch_ = static_cast<std::byte*>(scratch);
  scratch_bytes_ = scratch == nullptr ? 0 : bytes;
  unplanned_ = false;
}

float* CpuMixedBackend::widened(int slot, std::size_t& offset, std::size_t count) {
  const std::size_t wide = count * sizeof(float);
  if (scratch_ == nullptr || offset + wide > scratch_bytes_) {  // no plan, or an op outside the planned step
    if (scratch_ != nullptr) unplanned_ = true;
    return slots_[static_cast<std::size_t>(slot)].as<float>(count);
  }
  float* p = reinterpret_cast<float*>(scratch_ + offset);
  offset += (wide + kCpuWideningAlign - 1) / kCpuWideningAlign * kCpuWideningAlign;
  return p;
}

// ---- GEMMs ----

bool CpuMixedBackend::bf16_gemm(const cpu::GemmShape& s, const Tensor& a, const Tensor& b, Tensor c) {
  const bool c_ok = c.dtype == DType::f32 || (c.dtype == DType::bf16 && !s.accumulate);
  if (a.dtype != DType::bf16 || b.dtype != DType::bf16 || !c_ok || s.m == 0 || s.n == 0 || s.k == 0) return false;
  if (!gemm_) gemm_ = std::make_unique<cpu::Bf16Gemm>(threads());
  const auto* ap = static_cast<const std::uint16_t*>(a.data);
  const auto* bp = static_cast<const std::uint16_t*>(b.data);
  if (c.dtype == DType::f32) {
    gemm_->run(s, ap, bp, c.f32());
  } else {  // fp32 result rounded once into bf16, as cuBLASLt's epilogue
    std::size_t offset = 0;
    float* wide = widened(0, offset, static_cast<std::size_t>(c.numel()));
    gemm_->run(s, ap, bp, wide);
    cpu::narrow(c.data, c.dtype, wide, c.numel(), threads());
  }
  return true;
}

void CpuMixedBackend::linear_forward(Tensor out, Tensor x, Tensor weight) {
  const std::int64_t rows = x.shape.rows(), in = x.shape.last(), outs = weight.shape[0];
  if (weight.shape.rank() == 2 && weight.shape[1] == in && out.numel() == rows * outs &&
      bf16_gemm({.trans_b = true, .m = rows, .n = outs, .k = in, .lda = in, .ldb = in, .ldc = outs}, x, weight, out))
    return;  // (N, O) = (N, I) @ (O, I)^T
  Widening w(*this);
  CpuBackend::linear_forward(w.out(out), w.in(x), w.in(weight));
  w.done();
}

void CpuMixedBackend::linear_backward_input(Tensor dx, Tensor dout, Tensor weight) {
  const std::int64_t rows = dout.shape.rows(), outs = dout.shape.last(), in = weight.shape.last();
  if (weight.shape.rank() == 2 && weight.shape[0] == outs && dx.numel() == rows * in &&
      bf16_gemm({.m = rows, .n = in, .k = outs, .lda = outs, .ldb = in, .ldc = in}, dout, weight, dx))
    return;  // (N, I) = (N, O) @ (O, I)
  Widening w(*this);
  CpuBackend::linear_backward_input(w.out(dx), w.in(dout), w.in(weight));
  w.done();
}

void CpuMixedBackend::linear_backward_weight(Tensor dweight, Tensor dout, Tensor x) {
  const std::int64_t rows = x.shape.rows(), in = x.shape.last(), outs = dout.shape.last();
  if (dweight.shape.rank() == 2 && dweight.shape[0] == outs && dweight.shape[1] == in && dout.shape.rows() == rows &&
      bf16_gemm({.trans_a = true, .m = outs, .n = in, .k = rows, .lda = outs, .ldb = in, .ldc = in, .accumulate = true},
                dout, x, dweight))
    return;  // (O, I) += (N, O)^T @ (N, I)
  Widening w(*this);
  CpuBackend::linear_backward_weight(w.inout(dweight), w.in(dout), w.in(x));
  w.done();
}

// ---- every other op: widen, compute in fp32, round once ----

void CpuMixedBackend::embedding_forward(Tensor out, Tensor ids, Tensor table) {
  Widening w(*this);
  CpuBackend::embedding_forward(w.out(out), ids, w.in(table));
  w.done();
}

void CpuMixedBackend::embedding_backward(Tensor dtable, Tensor ids, Tensor dout) {
  Widening w(*this);
  CpuBackend::embedding_backward(w.inout(dtable), ids, w.in(dout));
  w.done();
}

void CpuMixedBackend::embedding_forward_shard(Tensor out, Tensor ids, Tensor table, VocabShard shard) {
  Widening w(*this);
  CpuBackend::embedding_forward_shard(w.out(out), ids, w.in(table), shard);
  w.done();
}

void CpuMixedBackend::embedding_backward_shard(Tensor dtable, Tensor ids, Tensor dout, VocabShard shard) {
  Widening w(*this);
  CpuBackend::embedding_backward_shard(w.inout(dtable), ids, w.in(dout), shard);
  w.done();
}

void CpuMixedBackend::rmsnorm_forward(Tensor out, Tensor rstd, Tensor x, Tensor weight, float eps) {
  Widening w(*this);
  CpuBackend::rmsnorm_forward(w.out(out), rstd, w.in(x), w.in(weight), eps);
  w.done();
}

void CpuMixedBackend::rmsnorm_backward(Tensor dx, Tensor dweight, Tensor dout, Tensor x, Tensor weight, Tensor rstd) {
  Widening w(*this);
  CpuBackend::rmsnorm_backward(w.out(dx), w.inout(dweight), w.in(dout), w.in(x), w.in(weight), rstd);
  w.done();
}

void CpuMixedBackend::rope_forward(Tensor qkv, Tensor cos, Tensor sin, int rotated_heads, int head_dim) {
  Widening w(*this);
  CpuBackend::rope_forward(w.inout(qkv), cos, sin, rotated_heads, head_dim);
  w.done();
}

void CpuMixedBackend::rope_backward(Tensor dqkv, Tensor cos, Tensor sin, int rotated_heads, int head_dim) {
  Widening w(*this);
  CpuBackend::rope_backward(w.inout(dqkv), cos, sin, rotated_heads, head_dim);
  w.done();
}

void CpuMixedBackend::attention_kv_pack(Tensor kv, Tensor qkv, int n_heads, int n_kv_heads) {
  Widening w(*this);
  CpuBackend::attention_kv_pack(w.out(kv), w.in(qkv), n_heads, n_kv_heads);
  w.done();
}

void CpuMixedBackend::attention_block_forward(Tensor out, Tensor lse, Tensor qkv, SeqRange q, Tensor kv, SeqRange k,
                                              AttentionMask mask, int n_heads, int n_kv_heads) {
  Widening w(*this);
  CpuBackend::attention_block_forward(w.out(out), lse, w.in(qkv), q, w.in(kv), k, mask, n_heads, n_kv_heads);
  w.done();
}

void CpuMixedBackend::attention_block_backward(Tensor dq, Tensor dkv, Tensor dout, Tensor qkv, SeqRange q, Tensor kv,
                                               SeqRange k, Tensor out, Tensor lse, AttentionMask mask, int n_heads,
                                               int n_kv_heads) {
  Widening w(*this);
  CpuBackend::attention_block_backward(w.out(dq), dkv, w.in(dout), w.in(qkv), q, w.in(kv), k, w.in(out), lse, mask,
                                       n_heads, n_kv_heads);
  w.done();
}

void CpuMixedBackend::attention_grad_pack(Tensor dqkv, Tensor dq, Tensor dkv) {
  Widening w(*this);
  CpuBackend::attention_grad_pack(w.out(dqkv), dq, dkv);
  w.done();
}

void CpuMixedBackend::moe_route(Tensor experts, Tensor gates, Tensor probs, Tensor lse, Tensor logits,
                                const MoeRouting& routing, Tensor bias) {
  Widening w(*this);
  CpuBackend::moe_route(experts, gates, probs, lse, w.in(logits), routing, bias);
  w.done();
}

void CpuMixedBackend::moe_route_backward(Tensor dlogits, Tensor dgates, Tensor logits, Tensor probs, Tensor lse,
                                         Tensor experts, Tensor gates, const MoeRouting& routing, float z_grad,
                                         Tensor seq_grad) {
  Widening w(*this);
  CpuBackend::moe_route_backward(w.out(dlogits), dgates, w.in(logits), probs, lse, experts, gates, routing, z_grad,
                                 seq_grad);
  w.done();
}

void CpuMixedBackend::moe_combine(Tensor out, Tensor rows, Tensor gates) {
  Widening w(*this);
  CpuBackend::moe_combine(w.out(out), w.in(rows), gates);
  w.done();
}

void CpuMixedBackend::moe_combine_backward(Tensor drows, Tensor dgates, Tensor dout, Tensor rows, Tensor gates) {
  Widening w(*this);
  CpuBackend::moe_combine_backward(w.out(drows), dgates, w.in(dout), w.in(rows), gates);
  w.done();
}

void CpuMixedBackend::swiglu_forward(Tensor out, Tensor gate_up) {
  Widening w(*this);
  CpuBackend::swiglu_forward(w.out(out), w.in(gate_up));
  w.done();
}

void CpuMixedBackend::swiglu_backward(Tensor dgate_up, Tensor dout, Tensor gate_up) {
  Widening w(*this);
  CpuBackend::swiglu_backward(w.out(dgate_up), w.in(dout), w.in(gate_up));
  w.done();
}

void CpuMixedBackend::add(Tensor out, Tensor a, Tensor b) {
  Widening w(*this);
  CpuBackend::add(w.out(out), w.in(a), w.in(b));
  w.done();
}

void CpuMixedBackend::cross_entropy_forward(Tensor losses, Tensor lse, Tensor logits, Tensor targets) {
  Widening w(*this);
  CpuBackend::cross_entropy_forward(losses, lse, w.in(logits), targets);
  w.done();
}

void CpuMixedBackend::cross_entropy_backward(Tensor dlogits, Tensor logits, Tensor lse, Tensor targets, float dloss) {
  Widening w(*this);
  CpuBackend::cross_entropy_backward(w.out(dlogits), w.in(logits), lse, targets, dloss);
  w.done();
}

void CpuMixedBackend::cross_entropy_shard_stats(Tensor stats, Tensor logits, Tensor targets, VocabShard shard) {
  Widening w(*this);
  CpuBackend::cross_entropy_shard_stats(stats, w.in(logits), targets, shard);
  w.done();
}

void CpuMixedBackend::cross_entropy_backward_shard(Tensor dlogits, Tensor logits, Tensor lse, Tensor targets,
                                                   float dloss, VocabShard shard) {
  Widening w(*this);
  CpuBackend::cross_entropy_backward_shard(w.out(dlogits), w.in(logits), lse, targets, dloss, shard);
  w.done();
}

}  // namespace ustrain
