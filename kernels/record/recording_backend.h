// The recording backend: every op of the interface (kernels/backend.h) recorded, none
// computed. A planner runs a rank's real training step on it to learn what the step costs
// (which ops, on what shapes, how many FLOPs and bytes) without the memory or the time.
//
// FLOPs count the matrix multiplies only, in the convention of the model's formula
// (LlamaModel::flops_per_token, 6 N + 6 L d S per token):
//   linear_forward, linear_backward_input, linear_backward_weight   2 m n k each
//   grouped_linear_*     not recorded as such: the base class's loop records one linear op
//                        per group with rows, so a grouped GEMM is priced as the sum of its
//                        GEMMs (and the CUDA grouped GEMM takes no op scratch)
//   attention_block_forward   Q K^T and P V for nq queries against nk keys, each B H nq nk Dh
//                        multiply-adds (2 FLOPs each): 4 B H nq nk Dh, halved by a causal
//                        mask (S^2 / 2, not S (S + 1) / 2): 2 B H S^2 Dh for a whole sequence;
//                        under a window or document ids, 4 H Dh times the score entries the
//                        CPU kernel computes (kernels/block_mask_rows.h), documents counted
//                        where their ids lie in the caller's host memory or were copied here
//                        from it (the last i32 copy into each address is kept), else as one
//                        document
//   attention_block_backward   twice the forward
// with H this rank's query heads. Every other op (norms, RoPE, SwiGLU, adds, embeddings,
// cross-entropy, the optimizer, copies) counts 0 FLOPs and is priced by its bytes.
//
// Bytes are what an op reads plus what it writes, each tensor argument once per access:
// inputs read, outputs written, outputs accumulated into (dweight +=) or updated in place
// read and written. An embedding touches only the rows it looks up (N rows of D); RoPE only
// the rotated heads.
//
// Memory: allocate() reserves address space that is never committed or touched (PROT_NONE,
// no swap reserved), so a plan of any size costs nothing, views into it work, and anything
// that reads or writes it behind the backend's back faults at once. Host results come back
// as nothing: copies to the host leave the host buffer as it was (but for a router's choices,
// below), sum_of_squares returns 0
// (so a recorded training step never clips: it lacks the one `scale` pass over the gradients
// that clipping adds to a real step whose gradient norm is above train.grad_clip).
// available_memory_bytes() is 0 (unknown), so the memory-fit checks let any plan through:
// reserved_bytes() and peak_device_bytes() say what it would hold.
//
// Routing: a host copy of the experts moe_route chose reads a balanced routing, choice j of
// token t going to expert (t k + j) mod E, so that a recorded mixture-of-experts step runs each
// expert's GEMMs on its even share of the rows, as a balanced router would, and expert
// parallelism moves an even share to every rank (rather than every row to expert 0).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <map>
#include <string>
#include <vector>

#include "kernels/backend.h"

namespace ustrain {

// What an op is, for the summary.
enum class OpClass : std::uint8_t {
  gemm,         // linear_forward / _backward_input / _backward_weight
  attention,    // the attention block ops
  elementwise,  // norms, RoPE, SwiGLU, adds, embeddings, cross-entropy
  optimizer,    // AdamW, sum of squares, scale (clipping, loss scaling)
  copy,         // copy, convert, fill
};
inline constexpr int kOpClasses = 5;
const char* op_class_name(OpClass c);

struct RecordedOp {
  const char* name = "";      // the Backend method, "linear_forward"
  OpClass op_class = OpClass::copy;
  std::vector<Shape> shapes;  // of its tensor arguments, in argument order
  DType dtype = DType::f32;   // of its first tensor argument
  std::int64_t flops = 0;
  std::int64_t bytes = 0;     // read + written
  std::vector<DType> dtypes;  // of its tensor arguments, in argument order
  // The integer arguments that size its scratch (kernels/record/op_scratch.h), attention's
  // only: n_heads, n_kv_heads, then for a block q.begin, q.count, k.begin, k.count, causal.
  std::vector<std::int64_t> args;
};

struct OpTotals {
  std::int64_t calls = 0, flops = 0, bytes = 0;
  OpTotals& operator+=(const OpTotals& o);
};

// Totals per op class, and a table of them for people.
struct RecordSummary {
  std::array<OpTotals, kOpClasses> by_class{};
  const OpTotals& operator[](OpClass c) const { return by_class[static_cast<std::size_t>(c)]; }
  OpTotals total() const;
  std::string text() const;
};

class RecordingBackend final : public Backend {
 public:
  // `device`: the device the recorded run believes it computes on (tensors are tagged with it,
  // and communicators are chosen for it); nothing runs there.
  explicit RecordingBackend(Device device = Device::cpu) : device_(device) {}
  ~RecordingBackend() override;
  RecordingBackend(const RecordingBackend&) = delete;
  RecordingBackend& operator=(const RecordingBackend&) = delete;

  const std::vector<RecordedOp>& ops() const { return ops_; }
  RecordSummary summary() const;
  // Forgets the ops recorded so far (e.g. those of setting up, before the step to price).
  void clear() { ops_.clear(); }
  // Address space reserved now and at most at once: what the planned arenas would hold.
  std::size_t reserved_bytes() const { return reserved_; }

  Device device() const override { return device_; }
  std::string name() const override;
  void* allocate(std::size_t bytes) override;
  void release(void* p) override;
  void copy(Tensor dst, const Tensor& src) override;
  void fill(Tensor dst, float value) override;
  void convert(Tensor dst, const Tensor& src) override;
  // Runs the hook, if any: the pipeline executor synchronizes at the end of every compute
  // action while it traces, so a planner learns there which recorded ops each action ran.
  void synchronize() override {
    if (synchronize_hook_) synchronize_hook_();
  }
  void set_synchronize_hook(std::function<void()> hook) { synchronize_hook_ = std::move(hook); }
  std::size_t peak_device_bytes() const override { return peak_reserved_; }

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
  void record(const char* name, OpClass c, std::initializer_list<const Tensor*> tensors, std::int64_t flops,
              std::int64_t bytes, std::vector<std::int64_t> args = {});
  void rope(const char* name, const Tensor& qkv, const Tensor& cos, const Tensor& sin, int rotated_heads,
            int head_dim);

  Device device_;
  std::vector<RecordedOp> ops_;
  std::map<void*, std::size_t> reservations_;  // base -> bytes
  // Whether `p` lies in address space this backend reserved (else it is the caller's host memory).
  bool reserved(const void* p) const;
  // Whether the mask's document ids lie in the caller's host memory (never in a recorded copy).
  bool documents_readable(const AttentionMask& mask) const;
  // The mask with document ids copied here from the host read from what was copied.
  AttentionMask with_host_documents(AttentionMask mask) const;
  std::size_t reserved_ = 0, peak_reserved_ = 0;
  std::map<const void*, std::int64_t> routed_;  // a routing's chosen experts (N, k) -> E
  // i32 tensors copied from the host into reserved memory (token and document ids), by
  // destination: the document ids a masked attention block is priced with.
  std::map<const void*, std::vector<std::int32_t>> host_ids_;
  std::function<void()> synchronize_hook_;
};

}  // namespace ustrain
