// The CPU backend with bf16 and fp16 storage: the model of the GPU's mixed precision on any
// machine. Every op keeps the CUDA backend's contract (16-bit activations and weight copies,
// fp32 statistics, gradients and optimizer state) and its numerics: 16-bit operands are
// widened to fp32, the fp32 reference op computes, and each result is rounded once into its
// 16-bit tensor, as the CUDA kernels load, compute in fp32 and round on store. bf16 GEMMs run
// on oneDNN's bf16 matmul (products exact, fp32 sums, one rounding of the result, as
// cuBLASLt's); fp16 GEMMs on the fp32 GEMM of widened operands (their products are exact in
// fp32 too). fp32 tensors go straight to the fp32 ops, bit for bit as CpuBackend.
//
// The fp32 stand-ins live in the planned op scratch (the memory plan's op-scratch line, sized
// by kernels/record/op_scratch.h's cpu_widening_bytes over the step's ops) once the trainer
// hands it over. Without one (tests, tools), and for an op larger than the planned step's
// (the peak-rate measurement's 1024^3 GEMM, the benchmarks), in buffers of the backend's own
// that grow; unplanned_widening() says whether that happened since a plan was handed over.
#pragma once

#include <array>
#include <cstddef>
#include <memory>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/onednn_gemm.h"

namespace ustrain {

class CpuMixedBackend : public CpuBackend {
 public:
  explicit CpuMixedBackend(int threads = 0);

  void embedding_forward(Tensor out, Tensor ids, Tensor table) override;
  void embedding_backward(Tensor dtable, Tensor ids, Tensor dout) override;
  void embedding_forward_shard(Tensor out, Tensor ids, Tensor table, VocabShard shard) override;
  void embedding_backward_shard(Tensor dtable, Tensor ids, Tensor dout, VocabShard shard) override;

  void rmsnorm_forward(Tensor out, Tensor rstd, Tensor x, Tensor weight, float eps) override;
  void rmsnorm_backward(Tensor dx, Tensor dweight, Tensor dout, Tensor x, Tensor weight, Tensor rstd) override;

  void linear_forward(Tensor out, Tensor x, Tensor weight) override;
  void linear_backward_input(Tensor dx, Tensor dout, Tensor weight) override;
  void linear_backward_weight(Tensor dweight, Tensor dout, Tensor x) override;

  void rope_forward(Tensor qkv, Tensor cos, Tensor sin, int rotated_heads, int head_dim) override;
  void rope_backward(Tensor dqkv, Tensor cos, Tensor sin, int rotated_heads, int head_dim) override;

  void attention_kv_pack(Tensor kv, Tensor qkv, int n_heads, int n_kv_heads) override;
  void attention_block_forward(Tensor out, Tensor lse, Tensor qkv, SeqRange q, Tensor kv, SeqRange k,
                               AttentionMask mask, int n_heads, int n_kv_heads) override;
  void attention_block_backward(Tensor dq, Tensor dkv, Tensor dout, Tensor qkv, SeqRange q, Tensor kv, SeqRange k,
                                Tensor out, Tensor lse, AttentionMask mask, int n_heads, int n_kv_heads) override;
  void attention_grad_pack(Tensor dqkv, Tensor dq, Tensor dkv) override;

  void moe_route(Tensor experts, Tensor gates, Tensor probs, Tensor lse, Tensor logits, const MoeRouting& routing,
                 Tensor bias) override;
  void moe_route_backward(Tensor dlogits, Tensor dgates, Tensor logits, Tensor probs, Tensor lse, Tensor experts,
                          Tensor gates, const MoeRouting& routing, float z_grad, Tensor seq_grad) override;
  void moe_combine(Tensor out, Tensor rows, Tensor gates) override;
  void moe_combine_backward(Tensor drows, Tensor dgates, Tensor dout, Tensor rows, Tensor gates) override;

  void swiglu_forward(Tensor out, Tensor gate_up) override;
  void swiglu_backward(Tensor dgate_up, Tensor dout, Tensor gate_up) override;
  void add(Tensor out, Tensor a, Tensor b) override;

  void cross_entropy_forward(Tensor losses, Tensor lse, Tensor logits, Tensor targets) override;
  void cross_entropy_backward(Tensor dlogits, Tensor logits, Tensor lse, Tensor targets, float dloss) override;
  void cross_entropy_shard_stats(Tensor stats, Tensor logits, Tensor targets, VocabShard shard) override;
  void cross_entropy_backward_shard(Tensor dlogits, Tensor logits, Tensor lse, Tensor targets, float dloss,
                                    VocabShard shard) override;

  std::size_t op_scratch_bytes(const RecordedOp& op) override;
  void use_op_scratch(void* scratch, std::size_t bytes) override;
  bool unplanned_widening() const { return unplanned_; }

 private:
  class Widening;
  // A GEMM on bf16 operands into fp32 or bf16 `c`; false when the operands are not both bf16.
  bool bf16_gemm(const cpu::GemmShape& s, const Tensor& a, const Tensor& b, Tensor c);

  // `count` floats for the op's stand-in number `slot` (slot 0 also holds a bf16 GEMM's fp32
  // result), from the planned op scratch at `offset` (advanced past them), or when that cannot
  // hold them from the slot's own buffer.
  float* widened(int slot, std::size_t& offset, std::size_t count);

  static constexpr int kSlots = 8;  // the most 16-bit tensors one op takes
  std::array<ScratchBuffer, kSlots> slots_;
  std::byte* scratch_ = nullptr;  // the planned op scratch, when handed over
  std::size_t scratch_bytes_ = 0;
  bool unplanned_ = false;
  std::unique_ptr<cpu::Bf16Gemm> gemm_;
};

}  // namespace ustrain
