// The CPU backend: the reference implementation of every op, float32 compute.
//
// Parallelism is OpenMP over independent outputs (rows, heads, column blocks, blocks of a
// GEMM's result); each GEMM call goes to a single-threaded OpenBLAS (see parallel_gemm.h).
// Every reduction sums in a fixed order, so results are the same bits on every run, and
// those of embedding_backward, rmsnorm_backward's dweight, sum_of_squares and attention
// are the same whatever the thread count.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "kernels/backend.h"

namespace ustrain {

// A 64-byte aligned buffer that only ever grows, so steady-state steps never allocate.
class ScratchBuffer {
 public:
  void* bytes(std::size_t count);
  template <class T>
  T* as(std::size_t count) {
    return static_cast<T*>(bytes(count * sizeof(T)));
  }

 private:
  struct Free {
    void operator()(void* p) const;
  };
  std::unique_ptr<void, Free> data_;
  std::size_t capacity_ = 0;
};

class CpuBackend : public Backend {
 public:
  // threads > 0: that many OpenMP threads; 0: all cores (OMP_NUM_THREADS if set).
  // Sets OpenBLAS, process-wide, to one thread: the backend splits GEMMs itself.
  explicit CpuBackend(int threads = 0);

  Device device() const override { return Device::cpu; }
  std::string name() const override;
  int threads() const { return threads_; }

  void* allocate(std::size_t bytes) override;
  void release(void* p) override;
  void copy(Tensor dst, const Tensor& src) override;
  void fill(Tensor dst, float value) override;
  void convert(Tensor dst, const Tensor& src) override;
  void synchronize() override {}
  std::size_t available_memory_bytes() const override;
  std::string memory_name() const override { return "this host"; }

  void embedding_forward(Tensor out, Tensor ids, Tensor table) override;
  void embedding_backward(Tensor dtable, Tensor ids, Tensor dout) override;
  void embedding_forward_shard(Tensor out, Tensor ids, Tensor table, VocabShard shard) override;
  void embedding_backward_shard(Tensor dtable, Tensor ids, Tensor dout, VocabShard shard) override;

  void rmsnorm_forward(Tensor out, Tensor rstd, Tensor x, Tensor weight, float eps) override;
  void rmsnorm_backward(Tensor dx, Tensor dweight, Tensor dout, Tensor x, Tensor weight, Tensor rstd) override;

  void linear_forward(Tensor out, Tensor x, Tensor weight) override;
  void linear_backward_input(Tensor dx, Tensor dout, Tensor weight) override;
  void linear_backward_weight(Tensor dweight, Tensor dout, Tensor x) override;

  void rope_tables(Tensor cos, Tensor sin, std::span<const double> inv_freq, std::int64_t first_position) override;
  void rope_forward(Tensor qkv, Tensor cos, Tensor sin, int rotated_heads, int head_dim) override;
  void rope_backward(Tensor dqkv, Tensor cos, Tensor sin, int rotated_heads, int head_dim) override;

  void attention_kv_pack(Tensor kv, Tensor qkv, int n_heads, int n_kv_heads) override;
  void attention_block_forward(Tensor out, Tensor lse, Tensor qkv, SeqRange q, Tensor kv, SeqRange k,
                               AttentionMask mask, int n_heads, int n_kv_heads) override;
  void attention_merge(Tensor acc, Tensor lse, Tensor block_out, Tensor block_lse, SeqRange q) override;
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
  void cross_entropy_combine(Tensor losses, Tensor lse, Tensor parts, Tensor targets) override;
  void cross_entropy_backward_shard(Tensor dlogits, Tensor logits, Tensor lse, Tensor targets, float dloss,
                                    VocabShard shard) override;

  void adamw(Tensor param, Tensor grad, Tensor m, Tensor v, const AdamWParams& p) override;
  double sum_of_squares(Tensor x) override;
  void scale(Tensor x, float factor) override;

 private:
  void rope_apply(Tensor qkv, Tensor cos, Tensor sin, int rotated_heads, int head_dim, bool inverse);

  int threads_;
  ScratchBuffer attention_scratch_;  // per-thread score blocks
  ScratchBuffer reduction_scratch_;  // per-chunk partial sums
};

}  // namespace ustrain
