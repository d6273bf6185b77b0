#include "kernels/record/recording_backend.h"

#include <fmt/format.h>
#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "kernels/block_mask_rows.h"

namespace ustrain {

const char* op_class_name(OpClass c) {
  static constexpr const char* kNames[kOpClasses] = {"gemm", "attention", "elementwise", "optimizer", "copy"};
  return kNames[static_cast<int>(c)];
}

OpTotals& OpTotals::operator+=(const OpTotals& o) {
  calls += o.calls;
  flops += o.flops;
  bytes += o.bytes;
  return *this;
}

OpTotals RecordSummary::total() const {
  OpTotals t;
  for (const OpTotals& c : by_class) t += c;
  return t;
}

std::string RecordSummary::text() const {
  std::string s = fmt::format("{:<12} {:>9} {:>16} {:>12}\n", "op class", "calls", "FLOPs", "bytes");
  const auto line = [&s](const char* name, const OpTotals& t) {
    s += fmt::format("{:<12} {:>9} {:>16} {:>12}\n", name, t.calls, t.flops,
                     format_bytes(static_cast<std::size_t>(t.bytes)));
  };
  for (int c = 0; c < kOpClasses; ++c) line(op_class_name(static_cast<OpClass>(c)), by_class[static_cast<std::size_t>(c)]);
  line("total", total());
  return s;
}

namespace {

std::int64_t bytes_of(const Tensor& t) { return static_cast<std::int64_t>(t.bytes()); }

// Sums the bytes of several tensors.
std::int64_t bytes_of(std::initializer_list<const Tensor*> ts) {
  std::int64_t n = 0;
  for (const Tensor* t : ts) n += bytes_of(*t);
  return n;
}

// 2 m n k for out (m, n) = a (m, k) b (k, n), whatever the order of the arguments.
std::int64_t gemm_flops(std::int64_t m, std::int64_t n, std::int64_t k) { return 2 * m * n * k; }

// A block of nq queries against nk keys: B H nq nk Dh multiply-adds for one product, counted
// as 2 FLOPs each and halved by a causal mask (the whole causal sequence: B H S^2 Dh). Under a
// window or documents, the score entries the CPU kernel's tiles compute instead; documents
// count only where their ids are readable (`documents_readable`), else as one document.
std::int64_t block_product_flops(const Tensor& qkv, SeqRange q, SeqRange k, const AttentionMask& mask, int n_heads,
                                 int n_kv_heads, bool documents_readable) {
  const std::int64_t head_dim = qkv.shape.last() / (n_heads + 2 * n_kv_heads);
  if (mask.has_window() || mask.has_documents()) {
    const BlockMaskRows rows(mask, qkv.shape[0], q.count, k.count, documents_readable);
    return 2 * n_heads * head_dim * rows.tiled_entries(kAttentionQueryTile);
  }
  const std::int64_t product = qkv.shape[0] * n_heads * q.count * k.count * head_dim;
  return mask.kind == AttentionMask::Kind::causal ? product : 2 * product;
}

// The bytes of `count` of a tensor's `rows` rows (dimension 1 of (B, S, C)).
std::int64_t range_bytes(const Tensor& t, SeqRange r) {
  return t.shape[1] == 0 ? 0 : bytes_of(t) / t.shape[1] * r.count;
}

}  // namespace

RecordingBackend::~RecordingBackend() {
  for (const auto& [p, bytes] : reservations_) munmap(p, bytes);
}

std::string RecordingBackend::name() const { return fmt::format("recording backend (as {})", device_name(device_)); }

void* RecordingBackend::allocate(std::size_t bytes) {
  const std::size_t length = bytes == 0 ? 1 : bytes;
  void* p = mmap(nullptr, length, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED)
    throw UserError(fmt::format("the recording backend cannot reserve {} of address space: {}", format_bytes(bytes),
                                std::strerror(errno)));
  reservations_[p] = length;
  reserved_ += length;
  peak_reserved_ = std::max(peak_reserved_, reserved_);
  return p;
}

void RecordingBackend::release(void* p) {
  const auto it = reservations_.find(p);
  USTRAIN_ASSERT(it != reservations_.end(), "release of memory the recording backend did not reserve");
  munmap(it->first, it->second);
  reserved_ -= it->second;
  reservations_.erase(it);
}

void RecordingBackend::record(const char* name, OpClass c, std::initializer_list<const Tensor*> tensors,
                              std::int64_t flops, std::int64_t bytes, std::vector<std::int64_t> args) {
  RecordedOp op{name, c, {}, tensors.size() > 0 ? (*tensors.begin())->dtype : DType::f32, flops, bytes, {},
                std::move(args)};
  op.shapes.reserve(tensors.size());
  op.dtypes.reserve(tensors.size());
  for (const Tensor* t : tensors) {
    op.shapes.push_back(t->shape);
    op.dtypes.push_back(t->dtype);
  }
  ops_.push_back(std::move(op));
}

RecordSummary RecordingBackend::summary() const {
  RecordSummary s;
  for (const RecordedOp& op : ops_) s.by_class[static_cast<std::size_t>(op.op_class)] += OpTotals{1, op.flops, op.bytes};
  return s;
}

bool RecordingBackend::reserved(const void* p) const {
  auto it = reservations_.upper_bound(const_cast<void*>(p));
  if (it == reservations_.begin()) return false;
  --it;
  return static_cast<const char*>(p) < static_cast<const char*>(it->first) + it->second;
}

void RecordingBackend::copy(Tensor dst, const Tensor& src) {
  USTRAIN_ASSERT(dst.numel() == src.numel() && dst.dtype == src.dtype, "copy: shapes or dtypes differ");
  record("copy", OpClass::copy, {&dst, &src}, 0, bytes_of({&dst, &src}));
  const auto routing = routed_.find(src.data);
  if (routing != routed_.end() && src.dtype == DType::i32 && !reserved(dst.data)) {  // a balanced routing
    auto* experts = static_cast<std::int32_t*>(dst.data);
    const auto n_experts = static_cast<std::int32_t>(routing->second);
    for (std::int64_t i = 0, e = 0; i < dst.numel(); ++i, e = e + 1 == n_experts ? 0 : e + 1)
      experts[i] = static_cast<std::int32_t>(e);  // i % n_experts
  }
  if (src.dtype == DType::i32 && src.numel() > 0 && reserved(dst.data) && !reserved(src.data))  // ids from the host
    host_ids_[dst.data].assign(src.i32(), src.i32() + src.numel());
}

void RecordingBackend::fill(Tensor dst, float) { record("fill", OpClass::copy, {&dst}, 0, bytes_of(dst)); }

void RecordingBackend::convert(Tensor dst, const Tensor& src) {
  USTRAIN_ASSERT(dst.numel() == src.numel(), "convert: element counts differ");
  record("convert", OpClass::copy, {&dst, &src}, 0, bytes_of({&dst, &src}));
}

// ---- embedding: the N rows looked up (or scattered into) and the ids ----
void RecordingBackend::embedding_forward(Tensor out, Tensor ids, Tensor table) {
  record("embedding_forward", OpClass::elementwise, {&out, &ids, &table}, 0, 2 * bytes_of(out) + bytes_of(ids));
}

void RecordingBackend::embedding_backward(Tensor dtable, Tensor ids, Tensor dout) {
  const std::int64_t rows = dout.numel() * static_cast<std::int64_t>(dtype_size(dtable.dtype));
  record("embedding_backward", OpClass::elementwise, {&dtable, &ids, &dout}, 0,
         bytes_of(dout) + bytes_of(ids) + 2 * rows);
}

void RecordingBackend::embedding_forward_shard(Tensor out, Tensor ids, Tensor table, VocabShard) {
  record("embedding_forward_shard", OpClass::elementwise, {&out, &ids, &table}, 0, 2 * bytes_of(out) + bytes_of(ids));
}

void RecordingBackend::embedding_backward_shard(Tensor dtable, Tensor ids, Tensor dout, VocabShard) {
  const std::int64_t rows = dout.numel() * static_cast<std::int64_t>(dtype_size(dtable.dtype));
  record("embedding_backward_shard", OpClass::elementwise, {&dtable, &ids, &dout}, 0,
         bytes_of(dout) + bytes_of(ids) + 2 * rows);
}

// ---- RMSNorm ----
void RecordingBackend::rmsnorm_forward(Tensor out, Tensor rstd, Tensor x, Tensor weight, float) {
  record("rmsnorm_forward", OpClass::elementwise, {&out, &rstd, &x, &weight}, 0, bytes_of({&out, &rstd, &x, &weight}));
}

void RecordingBackend::rmsnorm_backward(Tensor dx, Tensor dweight, Tensor dout, Tensor x, Tensor weight, Tensor rstd) {
  record("rmsnorm_backward", OpClass::elementwise, {&dx, &dweight, &dout, &x, &weight, &rstd}, 0,
         bytes_of({&dx, &dweight, &dweight, &dout, &x, &weight, &rstd}));
}

// ---- linear: out (N, O) = x (N, I) @ weight (O, I)^T and its two backward products ----
void RecordingBackend::linear_forward(Tensor out, Tensor x, Tensor weight) {
  record("linear_forward", OpClass::gemm, {&out, &x, &weight},
         gemm_flops(x.shape.rows(), weight.shape[0], weight.shape.last()), bytes_of({&out, &x, &weight}));
}

void RecordingBackend::linear_backward_input(Tensor dx, Tensor dout, Tensor weight) {
  record("linear_backward_input", OpClass::gemm, {&dx, &dout, &weight},
         gemm_flops(dout.shape.rows(), weight.shape[0], weight.shape.last()), bytes_of({&dx, &dout, &weight}));
}

void RecordingBackend::linear_backward_weight(Tensor dweight, Tensor dout, Tensor x) {
  record("linear_backward_weight", OpClass::gemm, {&dweight, &dout, &x},
         gemm_flops(dout.shape.rows(), dweight.shape[0], dweight.shape.last()),
         bytes_of({&dweight, &dweight, &dout, &x}));
}

// ---- RoPE: the rotated heads of each row, read and written, and the tables ----
void RecordingBackend::rope_tables(Tensor cos, Tensor sin, std::span<const double>, std::int64_t) {
  record("rope_tables", OpClass::elementwise, {&cos, &sin}, 0, bytes_of({&cos, &sin}));
}

void RecordingBackend::rope(const char* name, const Tensor& qkv, const Tensor& cos, const Tensor& sin,
                            int rotated_heads, int head_dim) {
  const std::int64_t rotated = qkv.shape.rows() * rotated_heads * head_dim * static_cast<std::int64_t>(dtype_size(qkv.dtype));
  record(name, OpClass::elementwise, {&qkv, &cos, &sin}, 0, 2 * rotated + bytes_of({&cos, &sin}));
}

void RecordingBackend::rope_forward(Tensor qkv, Tensor cos, Tensor sin, int rotated_heads, int head_dim) {
  rope("rope_forward", qkv, cos, sin, rotated_heads, head_dim);
}

void RecordingBackend::rope_backward(Tensor dqkv, Tensor cos, Tensor sin, int rotated_heads, int head_dim) {
  rope("rope_backward", dqkv, cos, sin, rotated_heads, head_dim);
}

// ---- attention ----
namespace {

// What the CUDA backend's choice of path and scratch follows (kernels/record/op_scratch.h).
std::vector<std::int64_t> block_args(SeqRange q, SeqRange k, AttentionMask mask, int n_heads, int n_kv_heads) {
  const std::int64_t causal = mask.kind == AttentionMask::Kind::causal ? 1 : 0;
  return {n_heads, n_kv_heads, q.begin, q.count, k.begin, k.count, causal, mask.window, mask.has_documents() ? 1 : 0};
}

}  // namespace

// ---- attention over blocks: every block reads its query and key rows, writes its result ----
bool RecordingBackend::documents_readable(const AttentionMask& mask) const {
  for (const Tensor* docs : {&mask.q_documents, &mask.k_documents})
    if (docs->empty() || docs->device != Device::cpu || reserved(docs->data)) return false;
  return true;
}

AttentionMask RecordingBackend::with_host_documents(AttentionMask mask) const {
  for (Tensor* docs : {&mask.q_documents, &mask.k_documents}) {
    const auto kept = host_ids_.find(docs->data);
    if (docs->empty() || kept == host_ids_.end() || static_cast<std::int64_t>(kept->second.size()) < docs->numel())
      continue;
    *docs = Tensor(const_cast<std::int32_t*>(kept->second.data()), docs->shape, DType::i32);
  }
  return mask;
}

void RecordingBackend::attention_kv_pack(Tensor kv, Tensor qkv, int, int) {
  record("attention_kv_pack", OpClass::copy, {&kv, &qkv}, 0, 2 * bytes_of(kv));
}

void RecordingBackend::attention_block_forward(Tensor out, Tensor lse, Tensor qkv, SeqRange q, Tensor kv, SeqRange k,
                                               AttentionMask given, int n_heads, int n_kv_heads) {
  const AttentionMask mask = with_host_documents(given);
  record("attention_block_forward", OpClass::attention, {&out, &lse, &qkv, &kv},
         2 * block_product_flops(qkv, q, k, mask, n_heads, n_kv_heads, documents_readable(mask)),
         bytes_of({&out, &lse}) + range_bytes(qkv, q) + (kv.empty() ? 0 : range_bytes(kv, k)),
         block_args(q, k, mask, n_heads, n_kv_heads));
}

void RecordingBackend::attention_merge(Tensor acc, Tensor lse, Tensor block_out, Tensor block_lse, SeqRange) {
  record("attention_merge", OpClass::elementwise, {&acc, &lse, &block_out, &block_lse}, 0,
         3 * (bytes_of(block_out) + bytes_of(block_lse)));
}

void RecordingBackend::attention_block_backward(Tensor dq, Tensor dkv, Tensor dout, Tensor qkv, SeqRange q, Tensor kv,
                                                SeqRange k, Tensor out, Tensor lse, AttentionMask given, int n_heads,
                                                int n_kv_heads) {
  const AttentionMask mask = with_host_documents(given);
  // Packed keys: the gradient sums are read and written. A self block writes dqkv once, and
  // reads its keys with its queries.
  const std::int64_t grads = kv.empty() ? bytes_of(dq) : 2 * (range_bytes(dq, q) + range_bytes(dkv, k));
  record("attention_block_backward", OpClass::attention, {&dq, &dkv, &dout, &qkv, &kv, &out, &lse},
         4 * block_product_flops(qkv, q, k, mask, n_heads, n_kv_heads, documents_readable(mask)),
         grads + range_bytes(dout, q) + range_bytes(qkv, q) + (kv.empty() ? 0 : range_bytes(kv, k)) +
             range_bytes(out, q) + bytes_of(lse) / lse.shape.last() * q.count,
         block_args(q, k, mask, n_heads, n_kv_heads));
}

void RecordingBackend::attention_grad_pack(Tensor dqkv, Tensor dq, Tensor dkv) {
  record("attention_grad_pack", OpClass::copy, {&dqkv, &dq, &dkv}, 0, bytes_of({&dqkv, &dq, &dkv}));
}

// ---- mixture of experts: routing and the combine, priced by their bytes ----
void RecordingBackend::moe_route(Tensor experts, Tensor gates, Tensor probs, Tensor lse, Tensor logits,
                                 const MoeRouting&, Tensor bias) {
  routed_[experts.data] = logits.shape.last();
  if (bias.empty())
    record("moe_route", OpClass::elementwise, {&experts, &gates, &probs, &lse, &logits}, 0,
           bytes_of({&experts, &gates, &probs, &lse, &logits}));
  else
    record("moe_route", OpClass::elementwise, {&experts, &gates, &probs, &lse, &logits, &bias}, 0,
           bytes_of({&experts, &gates, &probs, &lse, &logits, &bias}));
}

void RecordingBackend::moe_route_backward(Tensor dlogits, Tensor dgates, Tensor logits, Tensor probs, Tensor lse,
                                          Tensor experts, Tensor gates, const MoeRouting&, float, Tensor seq_grad) {
  if (seq_grad.empty())
    record("moe_route_backward", OpClass::elementwise, {&dlogits, &dgates, &logits, &probs, &lse, &experts, &gates},
           0, bytes_of({&dlogits, &dgates, &logits, &probs, &lse, &experts, &gates}));
  else
    record("moe_route_backward", OpClass::elementwise,
           {&dlogits, &dgates, &logits, &probs, &lse, &experts, &gates, &seq_grad}, 0,
           bytes_of({&dlogits, &dgates, &logits, &probs, &lse, &experts, &gates, &seq_grad}));
}

void RecordingBackend::moe_combine(Tensor out, Tensor rows, Tensor gates) {
  record("moe_combine", OpClass::elementwise, {&out, &rows, &gates}, 0, bytes_of({&out, &rows, &gates}));
}

void RecordingBackend::moe_combine_backward(Tensor drows, Tensor dgates, Tensor dout, Tensor rows, Tensor gates) {
  record("moe_combine_backward", OpClass::elementwise, {&drows, &dgates, &dout, &rows, &gates}, 0,
         bytes_of({&drows, &dgates, &dout, &rows, &gates}));
}

// ---- SwiGLU, add ----
void RecordingBackend::swiglu_forward(Tensor out, Tensor gate_up) {
  record("swiglu_forward", OpClass::elementwise, {&out, &gate_up}, 0, bytes_of({&out, &gate_up}));
}

void RecordingBackend::swiglu_backward(Tensor dgate_up, Tensor dout, Tensor gate_up) {
  record("swiglu_backward", OpClass::elementwise, {&dgate_up, &dout, &gate_up}, 0, bytes_of({&dgate_up, &dout, &gate_up}));
}

void RecordingBackend::add(Tensor out, Tensor a, Tensor b) {
  record("add", OpClass::elementwise, {&out, &a, &b}, 0, bytes_of({&out, &a, &b}));
}

// ---- cross-entropy ----
void RecordingBackend::cross_entropy_forward(Tensor losses, Tensor lse, Tensor logits, Tensor targets) {
  record("cross_entropy_forward", OpClass::elementwise, {&losses, &lse, &logits, &targets}, 0,
         bytes_of({&losses, &lse, &logits, &targets}));
}

void RecordingBackend::cross_entropy_backward(Tensor dlogits, Tensor logits, Tensor lse, Tensor targets, float) {
  record("cross_entropy_backward", OpClass::elementwise, {&dlogits, &logits, &lse, &targets}, 0,
         bytes_of({&dlogits, &logits, &lse, &targets}));
}

void RecordingBackend::cross_entropy_shard_stats(Tensor stats, Tensor logits, Tensor targets, VocabShard) {
  record("cross_entropy_shard_stats", OpClass::elementwise, {&stats, &logits, &targets}, 0,
         bytes_of({&stats, &logits, &targets}));
}

void RecordingBackend::cross_entropy_combine(Tensor losses, Tensor lse, Tensor parts, Tensor targets) {
  record("cross_entropy_combine", OpClass::elementwise, {&losses, &lse, &parts, &targets}, 0,
         bytes_of({&losses, &lse, &parts, &targets}));
}

void RecordingBackend::cross_entropy_backward_shard(Tensor dlogits, Tensor logits, Tensor lse, Tensor targets, float,
                                                    VocabShard) {
  record("cross_entropy_backward_shard", OpClass::elementwise, {&dlogits, &logits, &lse, &targets}, 0,
         bytes_of({&dlogits, &logits, &lse, &targets}));
}

// ---- optimizer: param, m and v read and written, grad read ----
void RecordingBackend::adamw(Tensor param, Tensor grad, Tensor m, Tensor v, const AdamWParams&) {
  record("adamw", OpClass::optimizer, {&param, &grad, &m, &v}, 0, bytes_of({&param, &param, &grad, &m, &m, &v, &v}));
}

double RecordingBackend::sum_of_squares(Tensor x) {
  record("sum_of_squares", OpClass::optimizer, {&x}, 0, bytes_of(x));
  return 0.0;
}

void RecordingBackend::scale(Tensor x, float) { record("scale", OpClass::optimizer, {&x}, 0, 2 * bytes_of(x)); }

}  // namespace ustrain
