// The op interface: one abstract Backend, implemented by kernels/cpu (the reference)
// and kernels/cuda. Model code calls these and never branches on the device.
//
// Conventions
// - Tensors are contiguous row-major views (kernels/tensor.h) on the backend's device.
// - "N" is the number of token rows (B * S flattened); shapes are written next to each op.
// - Forward ops overwrite their outputs. Backward ops overwrite input gradients (dx) and
//   ACCUMULATE parameter gradients (dweight += ...), so gradient accumulation across
//   micro-batches and tied weights need no extra buffers.
// - Attention and RoPE work on the fused QKV projection: each token row holds
//   [q heads | k heads | v heads], each head `head_dim` wide, so one GEMM makes all three.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "kernels/attention_mask.h"
#include "kernels/tensor.h"

struct CUstream_st;  // cudaStream_t without the CUDA headers

namespace ustrain {

struct RecordedOp;  // kernels/record/recording_backend.h
namespace fp8 {
class Fp8Layers;  // kernels/fp8/fp8_layers.h
}

struct AdamWParams {
  float lr = 3e-4f;
  float beta1 = 0.9f;
  float beta2 = 0.95f;
  float eps = 1e-8f;
  float weight_decay = 0.0f;
  std::int64_t step = 1;  // 1-based, for bias correction
  // Multiplies every gradient as it is read (the loss scale's inverse times the clipping
  // factor): the scaling takes no pass over the gradients of its own.
  float grad_scale = 1.0f;
};

// The block of vocabulary rows one tensor-parallel rank holds of an embedding table, an
// output head or a logits row: global ids [begin, begin + valid) are its first `valid` rows
// (columns of logits); any rows after them pad the vocabulary to a multiple of the ranks and
// take no part.
struct VocabShard {
  std::int64_t begin = 0;
  std::int64_t valid = 0;
};

// Rows [begin, begin + count) along a sequence dimension: the block ops' way of naming part
// of a tensor that has no strides.
struct SeqRange {
  std::int64_t begin = 0;
  std::int64_t count = 0;
};
// Asserts that `r` lies inside a sequence of `seq` rows; `what` names the range in the message.
void check_seq_range(const SeqRange& r, std::int64_t seq, const char* what);

// How a mixture-of-experts router picks experts (core/model/moe_mlp.h).
struct MoeRouting {
  int top_k = 1;
  bool sigmoid = false;     // scores: sigmoid of each logit; else softmax over the experts
  bool renormalize = true;  // gate weights: the chosen scores divided by their sum
};

// One contiguous range AdamW updates; its weight decay overrides AdamWParams::weight_decay.
struct AdamWTensors {
  Tensor param, grad, m, v;
  float weight_decay = 0.0f;
  // Empty, or the 16-bit copy of `param` the model computes with: rewritten from the updated
  // values (convert()'s rounding) in the same pass.
  Tensor compute_copy;
};

// Host memory for copies to and from a backend's device (Backend::allocate_host_staging). Its
// deleter needs no backend, so it may outlive the backend that made it.
using HostStaging = std::unique_ptr<void, void (*)(void*)>;

class Backend {
 public:
  virtual ~Backend() = default;
  virtual Device device() const = 0;
  virtual std::string name() const = 0;

  // ---- memory (used by planned arenas only; never inside a step) ----
  virtual void* allocate(std::size_t bytes) = 0;
  virtual void release(void* p) = 0;
  // dst <- src, same element count and dtype; either side may live on the host.
  virtual void copy(Tensor dst, const Tensor& src) = 0;
  virtual void fill(Tensor dst, float value) = 0;
  // dst <- src with element-type conversion (f32, bf16, f16; round to nearest even), same
  // device, same element count: how compute copies of fp32 master weights are made.
  virtual void convert(Tensor dst, const Tensor& src) = 0;
  virtual void synchronize() = 0;
  // The stream the backend computes on (a cudaStream_t), for device communicators that order
  // their work with it; null on the CPU.
  virtual CUstream_st* compute_stream() const { return nullptr; }
  // Device bytes this backend has held at most at once: planned arenas plus the scratch and
  // library workspaces it keeps. 0 where it is not tracked (the CPU, whose peak is the
  // process's resident memory).
  virtual std::size_t peak_device_bytes() const { return 0; }
  // Bytes the backend could still allocate now, for checking a memory plan before it is
  // allocated: free GPU memory, or the host's available memory on the CPU; 0 when unknown.
  virtual std::size_t available_memory_bytes() const { return 0; }
  // What available_memory_bytes() measures, for messages: "GPU 0", "this host".
  virtual std::string memory_name() const { return "this device"; }
  // The planned library workspace (library_workspace_bytes(device()) bytes of this backend's
  // memory, kernels/library_workspace.h) for its libraries to work in; null takes it back
  // before it is released. Until one is given the backend allocates its own at first use.
  // `bytes` of host memory for staging copies to and from the device, for `what` (messages):
  // page-locked on CUDA, so copies run at full bus speed and may be asynchronous; plain memory
  // on the CPU. Running out is a UserError. Outside any step, like allocate().
  virtual HostStaging allocate_host_staging(std::size_t bytes, const char* what);
  virtual void use_library_workspace(void* workspace, std::size_t bytes) {
    (void)workspace;
    (void)bytes;
  }
  // Bytes of planned op scratch (the memory plan's op-scratch line) this backend takes for one
  // op of a recorded step (kernels/record/recording_backend.h), the step's shapes: on CUDA the
  // scratch its kernels, and cuDNN's attention plans for the shape, work in; 0 on the CPU,
  // whose ops keep their own scratch. May prepare the op for the shape (cuDNN plans it).
  virtual std::size_t op_scratch_bytes(const RecordedOp& op) {
    (void)op;
    return 0;
  }
  // The planned op scratch, op_scratch_bytes() of the step's ops at most, that every op's
  // scratch is carved from (one op at a time): an op needing more is an internal error. Null
  // takes it back before it is released; until one is given the backend grows its own.
  virtual void use_op_scratch(void* scratch, std::size_t bytes) {
    (void)scratch;
    (void)bytes;
  }

  // The linear layers whose GEMMs compute in FP8 and their scaling state (train.precision =
  // "fp8"); null on a backend that computes none in FP8.
  virtual fp8::Fp8Layers* fp8_layers() { return nullptr; }

  // ---- embedding ----
  // out (N, D) = table (V, D)[ids (N)]
  virtual void embedding_forward(Tensor out, Tensor ids, Tensor table) = 0;
  // dtable (V, D) += scatter(dout (N, D)) at ids; deterministic order. dtable is fp32 (a
  // parameter's gradient) or in dout's dtype (MoE's row scatters: each cell's rows are summed
  // in fp32 and rounded once).
  virtual void embedding_backward(Tensor dtable, Tensor ids, Tensor dout) = 0;
  // One shard of a vocabulary-parallel table (Vs, D): out rows whose id lies in the shard
  // get table[id - begin], the others zeros (the ranks' outputs add up to the lookup).
  virtual void embedding_forward_shard(Tensor out, Tensor ids, Tensor table, VocabShard shard) = 0;
  // dtable (Vs, D) += the rows of dout whose id lies in the shard; deterministic order.
  virtual void embedding_backward_shard(Tensor dtable, Tensor ids, Tensor dout, VocabShard shard) = 0;

  // ---- RMSNorm over the last dimension ----
  // out (N, D) = x * rstd * weight;  rstd (N) saved for backward.
  virtual void rmsnorm_forward(Tensor out, Tensor rstd, Tensor x, Tensor weight, float eps) = 0;
  // dx (N, D) overwritten; dweight (D) accumulated.
  virtual void rmsnorm_backward(Tensor dx, Tensor dweight, Tensor dout, Tensor x, Tensor weight,
                                Tensor rstd) = 0;

  // ---- linear, weight in (out, in) layout as Hugging Face stores it ----
  // out (N, O) = x (N, I) @ weight (O, I)^T
  virtual void linear_forward(Tensor out, Tensor x, Tensor weight) = 0;
  // The backward for the input: dx (N, I) = dout (N, O) @ weight (O, I), overwritten.
  virtual void linear_backward_input(Tensor dx, Tensor dout, Tensor weight) = 0;
  // The backward for the weight: dweight (O, I) += dout (N, O)^T @ x (N, I).
  virtual void linear_backward_weight(Tensor dweight, Tensor dout, Tensor x) = 0;
  // Both (the input gradient skipped when dx is empty). A pipeline schedule that splits the
  // backward (zero-bubble) calls the two halves at different times.
  void linear_backward(Tensor dx, Tensor dweight, Tensor dout, Tensor x, Tensor weight);

  // ---- grouped linear layers: a mixture of experts' GEMMs in one call ----
  // Group g is rows [offsets[g], offsets[g + 1]) of the row tensors (an expert's rows in expert
  // order) and weights[g] (O, I); offsets holds weights.size() + 1 ascending entries from 0 to
  // the row count. A group of no rows is skipped (its weight gradient untouched). The defaults
  // call the linear ops above once per non-empty group; a GPU runs them all in one launch.
  //
  // out (N, O) = x (N, I) @ weights[g] (O, I)^T on each group's rows.
  virtual void grouped_linear_forward(Tensor out, Tensor x, std::span<const Tensor> weights,
                                      std::span<const std::int64_t> offsets);
  // dx (N, I) = dout (N, O) @ weights[g] (O, I) on each group's rows, overwritten.
  virtual void grouped_linear_backward_input(Tensor dx, Tensor dout, std::span<const Tensor> weights,
                                             std::span<const std::int64_t> offsets);
  // dweights[g] (O, I) += dout (N, O)^T @ x (N, I) over each group's rows.
  virtual void grouped_linear_backward_weight(std::span<const Tensor> dweights, Tensor dout, Tensor x,
                                              std::span<const std::int64_t> offsets);

  // ---- rotary position embedding, rotate-half layout (as Hugging Face Llama) ----
  // cos, sin (S, head_dim / 2): tables for positions first_position .. first_position + S - 1,
  // filled by rope_tables from the inverse frequency of each rotated pair, inv_freq
  // (head_dim / 2), float64 on the host: angle = pos * inv_freq[i], its cos and sin computed
  // in float64. (A rank that holds parts of a sequence fills one table per part.)
  virtual void rope_tables(Tensor cos, Tensor sin, std::span<const double> inv_freq,
                           std::int64_t first_position) = 0;
  // In place on the first `rotated_heads` heads of each row of qkv (B, S, W).
  virtual void rope_forward(Tensor qkv, Tensor cos, Tensor sin, int rotated_heads, int head_dim) = 0;
  // The inverse rotation, in place on the gradient dqkv (B, S, W).
  virtual void rope_backward(Tensor dqkv, Tensor cos, Tensor sin, int rotated_heads, int head_dim) = 0;

  // ---- attention: one op family, over blocks of the sequence ----
  // Grouped-query attention, softmax scale 1/sqrt(Dh), of a block: a range of query rows of
  // qkv (B, Sq, W) against a range of key rows, under a mask (kernels/attention_mask.h). The
  // keys and values of a block are either packed, kv (B, Skv, 2 Hkv Dh) = [k heads | v heads]
  // (context parallelism's ring meets them one block at a time and merges the partial results
  // by their log-sum-exp, parallel/ring_attention.h; decoding reads its cache), or, with kv
  // empty, qkv's own k and v columns: a self block, as the whole sequence on one rank is.
  //
  // kv (B, S, 2 Hkv Dh) = the k and v columns of every row of qkv (B, S, W).
  virtual void attention_kv_pack(Tensor kv, Tensor qkv, int n_heads, int n_kv_heads) = 0;
  // out (B, q.count, H Dh) and lse (B, H, q.count) fp32: the attention of query rows q against
  // key rows k under `mask`, whose kind is the block's: causal, query row r of nq queries
  // against nk keys sees key rows 0 .. r + nk - nq (the ranges end at the same position);
  // none, every key; a window and document ids on absolute positions (kernels/attention_mask.h;
  // a causal block with a window must have q_first + nq == k_first + nk). out is fp32, or for a
  // self block in qkv's dtype too. A backend that does not compute windows or documents refuses
  // them with an error naming the field (require_implemented_mask). A query row that sees no
  // key gets out 0, lse -inf, and no gradient.
  virtual void attention_block_forward(Tensor out, Tensor lse, Tensor qkv, SeqRange q, Tensor kv, SeqRange k,
                                       AttentionMask mask, int n_heads, int n_kv_heads) = 0;
  // Merges a block's result into rows q of the running result acc (B, S, H Dh) fp32 with its
  // lse (B, H, S): acc = (acc e^lse + out e^block_lse) / e^lse', lse' = log(e^lse + e^block_lse).
  // block_out (B, q.count, H Dh), block_lse (B, H, q.count).
  virtual void attention_merge(Tensor acc, Tensor lse, Tensor block_out, Tensor block_lse, SeqRange q) = 0;
  // The backward of one block from the merged result of all of qkv's queries: out and dout
  // (B, Sq, H Dh), lse (B, H, Sq). Packed keys: dq (B, Sq, H Dh) fp32 += at rows q and dkv
  // (B, Skv, 2 Hkv Dh) fp32 += at rows k. A self block of the whole sequence (q and k every
  // row): dq is dqkv (B, Sq, W), in qkv's dtype or fp32, overwritten; dkv empty.
  virtual void attention_block_backward(Tensor dq, Tensor dkv, Tensor dout, Tensor qkv, SeqRange q, Tensor kv,
                                        SeqRange k, Tensor out, Tensor lse, AttentionMask mask, int n_heads,
                                        int n_kv_heads) = 0;
  // dqkv (B, S, W) = [dq | dkv] row by row, fp32 converted to dqkv's dtype.
  virtual void attention_grad_pack(Tensor dqkv, Tensor dq, Tensor dkv) = 0;

  // ---- mixture of experts: routing and the weighted combine ----
  // The experts' own GEMMs are linear ops on each expert's rows, and tokens move to and from
  // expert order as row gathers (embedding_forward / embedding_backward with row indices).
  //
  // From router logits (N, E): probs (N, E) fp32 = softmax or sigmoid of the logits computed
  // in fp32; experts (N, k) i32 = the k highest of each row's probs + bias (fp32 sums; bias (E)
  // fp32, or empty for none), highest first, a tie going to the lower expert index; gates (N, k)
  // fp32 = their probs (without the bias), divided by their sum when renormalising; lse (N)
  // fp32 = the log-sum-exp of each row's logits (the router z-loss).
  virtual void moe_route(Tensor experts, Tensor gates, Tensor probs, Tensor lse, Tensor logits,
                         const MoeRouting& routing, Tensor bias) = 0;
  // dlogits (N, E) overwritten: dgates (N, k) fp32 back through the renormalisation and the
  // score function, plus z_grad * 2 lse softmax(logits) per row (the gradient of z_grad * lse^2),
  // plus seq_grad (B, E) fp32 (empty for none) back through the score function: the gradient of
  // each token's normalised scores p_e / sum_m p_m (p itself for softmax) for the N / B tokens
  // of each of B sequences (the sequence-level balance loss). In dp: the chosen experts'
  // gradient (fp32), plus seq_grad's share computed in double and rounded once.
  virtual void moe_route_backward(Tensor dlogits, Tensor dgates, Tensor logits, Tensor probs, Tensor lse,
                                  Tensor experts, Tensor gates, const MoeRouting& routing, float z_grad,
                                  Tensor seq_grad) = 0;
  // out (N, D) = sum_j gates[t, j] * rows[t k + j] for the experts' outputs rows (N k, D) in
  // token order; the products and sum in fp32.
  virtual void moe_combine(Tensor out, Tensor rows, Tensor gates) = 0;
  // drows (N k, D) = gates[t, j] * dout[t] and dgates (N, k) fp32 = dout[t] . rows[t k + j],
  // both overwritten.
  virtual void moe_combine_backward(Tensor drows, Tensor dgates, Tensor dout, Tensor rows, Tensor gates) = 0;

  // ---- SwiGLU on the fused gate/up projection ----
  // gate_up (N, 2F) = [gate | up];  out (N, F) = silu(gate) * up
  virtual void swiglu_forward(Tensor out, Tensor gate_up) = 0;
  // dgate_up (N, 2F) overwritten.
  virtual void swiglu_backward(Tensor dgate_up, Tensor dout, Tensor gate_up) = 0;

  // ---- residual add: out = a + b (out may alias a or b). Its backward is the identity. ----
  virtual void add(Tensor out, Tensor a, Tensor b) = 0;

  // ---- fused softmax cross-entropy ----
  // losses (N) = lse - logits[target]; lse (N) saved. Rows whose target < 0 get loss 0.
  virtual void cross_entropy_forward(Tensor losses, Tensor lse, Tensor logits, Tensor targets) = 0;
  // dlogits (N, V) = (softmax(logits) - onehot(target)) * dloss; may alias logits.
  // Rows whose target < 0 get zero gradient.
  virtual void cross_entropy_backward(Tensor dlogits, Tensor logits, Tensor lse, Tensor targets,
                                      float dloss) = 0;

  // ---- vocabulary-parallel cross-entropy: each rank holds a shard of the logits columns ----
  // stats (2, N): row 0 the log-sum-exp of the shard's valid logits (-inf when it has none),
  // row 1 the target's logit where the target lies in the shard, else 0. Rows whose target < 0
  // get 0 in both. logits (N, Vs).
  virtual void cross_entropy_shard_stats(Tensor stats, Tensor logits, Tensor targets, VocabShard shard) = 0;
  // The shards' stats gathered, parts (P, 2, N) -> losses (N) = lse - target logit and lse (N)
  // = log sum_p exp(lse_p), the global log-sum-exp; rows whose target < 0 get 0 in both.
  virtual void cross_entropy_combine(Tensor losses, Tensor lse, Tensor parts, Tensor targets) = 0;
  // dlogits (N, Vs) = (exp(logits - lse) - onehot(target - begin)) * dloss over the valid
  // columns with the global lse (N); padding columns and rows whose target < 0 get zeros.
  // May alias logits.
  virtual void cross_entropy_backward_shard(Tensor dlogits, Tensor logits, Tensor lse, Tensor targets, float dloss,
                                            VocabShard shard) = 0;

  // ---- optimizer ----
  // Decoupled weight decay: p -= lr * (m_hat / (sqrt(v_hat) + eps) + weight_decay * p).
  virtual void adamw(Tensor param, Tensor grad, Tensor m, Tensor v, const AdamWParams& p) = 0;
  // AdamW over many ranges at once (a GPU does them in few launches); the same as one
  // adamw() call per range, each followed by convert(compute_copy, param) where it has one.
  virtual void adamw_multi(std::span<const AdamWTensors> ranges, const AdamWParams& p);
  // Sum of squares of all elements, accumulated in double; the global norm is the square
  // root of the sum over all gradient tensors (and ranks).
  virtual double sum_of_squares(Tensor x) = 0;
  // The sum over many tensors, added in the order given (deterministic).
  virtual double sum_of_squares_multi(std::span<const Tensor> xs);
  // x *= factor (gradient clipping, loss scaling).
  virtual void scale(Tensor x, float factor) = 0;
};

// GPUs this process can use: 0 without a driver, a device, or CUDA in this build.
int visible_gpus();
// The UUID of visible GPU `index` ("" without CUDA): which physical GPU a process uses.
std::string gpu_uuid(int index);
// "NVIDIA H100 80GB HBM3 (sm_90, 79.1 GiB)" of visible GPU `index`; UserError, as make_backend
// gives it, when this build or this machine has no GPU.
std::string gpu_description(int index);

// The backend for a device: `threads` CPU threads (0: all cores), or GPU `device_index`.
// Throws UserError when the device is not available in this build or on this machine.
std::unique_ptr<Backend> make_backend(Device device, int threads = 0, int device_index = 0);

}  // namespace ustrain
