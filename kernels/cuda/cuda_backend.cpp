// CudaBackend: checks shapes and dtypes, then hands raw pointers to the kernel launchers.
#include "kernels/cuda/cuda_backend.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdlib>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <spdlog/spdlog.h>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/cuda/adamw.h"
#include "kernels/cuda/cuda_backend_checks.h"
#include "kernels/cuda/cross_entropy.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_device.h"
#include "kernels/cuda/cuda_versions.h"
#include "kernels/cuda/attention/cudnn_attention.h"
#include "kernels/cuda/elementwise.h"
#include "kernels/cuda/embedding.h"
#include "kernels/cuda/gemm/grouped_gemm.h"
#include "kernels/cuda/gemm/lt_gemm.h"
#include "kernels/cuda/reduce.h"
#include "kernels/cuda/rmsnorm.h"
#include "kernels/cuda/rope.h"
#include "kernels/cuda/swiglu.h"
#include "kernels/library_workspace.h"
#include "kernels/record/op_scratch.h"

namespace ustrain::cuda {
namespace {

// Makes `index` the calling thread's device, before any member allocates on it.
int select_device(int index) {
  const int gpus = device_count();
  if (index < 0 || index >= gpus)
    throw UserError("no CUDA GPU " + std::to_string(index) + " visible (" + std::to_string(gpus) +
                    " visible); check CUDA_VISIBLE_DEVICES and the job's GPU allocation");
  USTRAIN_CUDA_CHECK(cudaSetDevice(index));
  return index;
}

}  // namespace

CudaBackend::CudaBackend(int device_index)
    : device_index_(select_device(device_index)),
      name_("cuda:" + std::to_string(device_index) + " " + device_description(device_index)) {
  reduce_result_ = static_cast<double*>(device_malloc(sizeof(double), "the norm reduction"));
  gemm_ = std::make_unique<LtGemm>();
  grouped_ = std::make_unique<GroupedGemm>();
  // USTRAIN_REQUIRE_CUDNN=1 (scripts/gpu-check.sh): a shape cuDNN should take (cudnn_supports
  // in attention_layout.h) but refuses is an error, not a quiet switch to our kernel, so a GPU
  // check proves which attention ran; shapes outside it (fp32, odd head sizes) still run ours.
  const char* strict = std::getenv("USTRAIN_REQUIRE_CUDNN");
  attention_ = std::make_unique<CudnnAttention>(
      strict != nullptr && std::string(strict) == "1",
      [this](std::size_t bytes, const std::string& what) { return scratch(bytes, what); });
  spdlog::info("{}: {}", name_, describe(read_cuda_versions()));
}

CudaBackend::~CudaBackend() {
  cudaStreamSynchronize(stream_.get());
  if (reduce_result_ != nullptr) cudaFree(reduce_result_);
}

// ---- memory ----

void* CudaBackend::allocate(std::size_t bytes) {
  void* p = device_malloc(std::max<std::size_t>(bytes, 1), "planned memory");
  allocations_[p] = bytes;
  allocated_bytes_ += bytes;
  peak_allocated_bytes_ = std::max(peak_allocated_bytes_, allocated_bytes_);
  return p;
}

void CudaBackend::release(void* p) {
  if (p == nullptr) return;
  const auto it = allocations_.find(p);
  USTRAIN_ASSERT(it != allocations_.end(), "release of memory this backend did not allocate");
  USTRAIN_CUDA_CHECK(cudaStreamSynchronize(stream_.get()));  // no queued op may still use it
  USTRAIN_CUDA_CHECK(cudaFree(p));
  allocated_bytes_ -= it->second;
  allocations_.erase(it);
}

std::size_t CudaBackend::peak_device_bytes() const {
  // An upper bound: the arenas' peak plus everything held beside them. (The planned library
  // workspace and op scratch are arenas; cuBLASLt's own workspace and the unplanned scratch
  // count while held.)
  return peak_allocated_bytes_ + scratch_.capacity() + gemm_->own_workspace_bytes() + grouped_->device_bytes() +
         sizeof(double);
}

HostStaging CudaBackend::allocate_host_staging(std::size_t bytes, const char* what) {
  if (bytes == 0) return HostStaging(nullptr, &free_pinned);
  return HostStaging(pinned_malloc(bytes, what), &free_pinned);
}

void CudaBackend::use_library_workspace(void* workspace, std::size_t bytes) {
  USTRAIN_ASSERT(workspace == nullptr || bytes >= library_workspace_bytes(Device::cuda),
                 "library workspace of " + std::to_string(bytes) + " bytes, below the " +
                     std::to_string(library_workspace_bytes(Device::cuda)) + " the CUDA backend plans");
  gemm_->use_workspace(workspace);
  grouped_->use_workspace(workspace, bytes);  // its calls and cuBLASLt's run one at a time on the stream
}

std::size_t CudaBackend::available_memory_bytes() const {
  std::size_t free_bytes = 0, total_bytes = 0;
  USTRAIN_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
  return free_bytes;
}

std::size_t CudaBackend::op_scratch_bytes(const RecordedOp& op) {
  std::size_t bytes = cuda_op_scratch_bytes(op);  // our kernels and cuDNN's staging
  if (const std::optional<RecordedAttention> a = recorded_attention(op); a && a->cudnn_offered) {
    // cuDNN's plan for the shape is made now, so its own workspace is known before the plan.
    const std::size_t cudnn = a->block ? attention_->block_scratch_bytes(a->block_dims, a->act, a->backward)
                                       : attention_->scratch_bytes(a->whole, a->act, a->backward);
    bytes = std::max(bytes, cudnn);
  }
  return bytes;
}

void CudaBackend::use_op_scratch(void* scratch, std::size_t bytes) {
  if (scratch != nullptr && scratch_.capacity() > 0) {
    USTRAIN_CUDA_CHECK(cudaStreamSynchronize(stream_.get()));  // no queued op may still use it
    scratch_.release();
  }
  planned_scratch_ = scratch;
  planned_scratch_bytes_ = scratch != nullptr ? bytes : 0;
}

void* CudaBackend::scratch(std::size_t bytes, std::string_view op) {
  if (planned_scratch_ == nullptr) return scratch_.get(bytes, stream_.get());
  USTRAIN_ASSERT(bytes <= planned_scratch_bytes_,
                 std::string(op) + " needs " + std::to_string(bytes) + " bytes of op scratch, above the " +
                     std::to_string(planned_scratch_bytes_) +
                     " the memory plan holds (its op-scratch line, the most the recorded step's ops take)");
  return planned_scratch_;
}

void CudaBackend::copy(Tensor dst, const Tensor& src) {
  USTRAIN_ASSERT(dst.dtype == src.dtype, std::string("copy ") + dtype_name(src.dtype) + " into " + dtype_name(dst.dtype));
  USTRAIN_ASSERT(dst.numel() == src.numel(), "copy " + src.shape.str() + " into " + dst.shape.str());
  if (dst.bytes() == 0 || dst.data == src.data) return;
  USTRAIN_CUDA_CHECK(cudaMemcpyAsync(dst.data, src.data, dst.bytes(), cudaMemcpyDefault, stream_.get()));
  // Host memory (pageable) must be safe to read or reuse when copy returns.
  if (dst.device == Device::cpu || src.device == Device::cpu) synchronize();
}

void CudaBackend::fill(Tensor dst, float value) {
  expect_device(dst, "fill dst");
  cuda::fill(dst.data, value, dst.numel(), dst.dtype, stream_.get());
}

void CudaBackend::convert(Tensor dst, const Tensor& src) {
  expect_device(dst, "convert dst");
  expect_device(src, "convert src");
  USTRAIN_ASSERT(dst.numel() == src.numel(), "convert " + src.shape.str() + " into " + dst.shape.str());
  USTRAIN_ASSERT(is_act(dst.dtype) && is_act(src.dtype), std::string("convert ") + dtype_name(src.dtype) + " into " +
                                                             dtype_name(dst.dtype) + ": only f32, bf16 and f16 convert");
  cuda::convert(dst.data, dst.dtype, src.data, src.dtype, dst.numel(), stream_.get());
}

void CudaBackend::synchronize() { USTRAIN_CUDA_CHECK(cudaStreamSynchronize(stream_.get())); }

// ---- embedding ----

void CudaBackend::embedding_forward(Tensor out, Tensor ids, Tensor table) {
  const DType act = act_of("embedding_forward", {&out, &table});
  expect_i32(ids, "embedding ids");
  const std::int64_t n = ids.numel(), vocab = table.shape[0], dim = table.shape.last();
  USTRAIN_ASSERT(table.shape.rank() == 2 && out.numel() == n * dim,
                 "embedding: out " + out.shape.str() + ", table " + table.shape.str() + ", " + std::to_string(n) + " ids");
  cuda::embedding_forward(out.data, static_cast<const std::int32_t*>(ids.data), table.data, n, vocab, dim, act,
                          stream_.get());
}

void CudaBackend::embedding_backward(Tensor dtable, Tensor ids, Tensor dout) {
  expect_i32(ids, "embedding ids");
  const DType act = act_of("embedding_backward", {&dout});
  // fp32 for a parameter's gradient; the activation dtype for MoE's row scatters.
  USTRAIN_ASSERT(dtable.dtype == DType::f32 || dtable.dtype == act,
                 std::string("embedding dtable must be f32 or ") + dtype_name(act) + ", got " + dtype_name(dtable.dtype));
  const std::int64_t n = ids.numel(), vocab = dtable.shape[0], dim = dtable.shape.last();
  USTRAIN_ASSERT(dtable.shape.rank() == 2 && dout.numel() == n * dim,
                 "embedding backward: dtable " + dtable.shape.str() + ", dout " + dout.shape.str());
  void* ws = scratch(embedding_backward_workspace_bytes(n), "embedding_backward");
  cuda::embedding_backward(dtable.data, dtable.dtype, static_cast<const std::int32_t*>(ids.data), dout.data, n, vocab,
                           dim, act, ws, stream_.get());
}

void CudaBackend::embedding_forward_shard(Tensor out, Tensor ids, Tensor table, VocabShard shard) {
  const DType act = act_of("embedding_forward_shard", {&out, &table});
  expect_i32(ids, "embedding ids");
  const std::int64_t n = ids.numel(), dim = table.shape.last();
  USTRAIN_ASSERT(table.shape.rank() == 2 && out.numel() == n * dim && shard.valid <= table.shape[0],
                 "embedding shard: out " + out.shape.str() + ", table " + table.shape.str());
  cuda::embedding_forward(out.data, static_cast<const std::int32_t*>(ids.data), table.data, n, shard.valid, dim, act,
                          stream_.get(), shard.begin);
}

void CudaBackend::embedding_backward_shard(Tensor dtable, Tensor ids, Tensor dout, VocabShard shard) {
  expect_f32(dtable, "embedding dtable");
  expect_i32(ids, "embedding ids");
  const DType act = act_of("embedding_backward_shard", {&dout});
  const std::int64_t n = ids.numel(), dim = dtable.shape.last();
  USTRAIN_ASSERT(dtable.shape.rank() == 2 && dout.numel() == n * dim && shard.valid <= dtable.shape[0],
                 "embedding shard backward: dtable " + dtable.shape.str() + ", dout " + dout.shape.str());
  void* ws = scratch(embedding_backward_workspace_bytes(n), "embedding_backward_shard");
  cuda::embedding_backward(dtable.f32(), DType::f32, static_cast<const std::int32_t*>(ids.data), dout.data, n,
                           shard.valid, dim, act, ws, stream_.get(), shard.begin);
}

// ---- RMSNorm ----

void CudaBackend::rmsnorm_forward(Tensor out, Tensor rstd, Tensor x, Tensor weight, float eps) {
  const DType act = act_of("rmsnorm_forward", {&x, &out, &weight});
  expect_f32(rstd, "rmsnorm rstd");
  const std::int64_t rows = x.shape.rows(), dim = x.shape.last();
  USTRAIN_ASSERT(out.shape == x.shape && weight.numel() == dim && rstd.numel() == rows,
                 "rmsnorm: x " + x.shape.str() + ", out " + out.shape.str() + ", weight " + weight.shape.str());
  cuda::rmsnorm_forward(out.data, rstd.f32(), x.data, weight.data, rows, dim, eps, act, stream_.get());
}

void CudaBackend::rmsnorm_backward(Tensor dx, Tensor dweight, Tensor dout, Tensor x, Tensor weight, Tensor rstd) {
  const DType act = act_of("rmsnorm_backward", {&x, &dx, &dout, &weight});
  expect_f32(dweight, "rmsnorm dweight");
  expect_f32(rstd, "rmsnorm rstd");
  const std::int64_t rows = x.shape.rows(), dim = x.shape.last();
  USTRAIN_ASSERT(dx.shape == x.shape && dout.shape == x.shape && weight.numel() == dim && dweight.numel() == dim &&
                     rstd.numel() == rows,
                 "rmsnorm backward: x " + x.shape.str() + ", dx " + dx.shape.str() + ", dout " + dout.shape.str());
  void* ws = scratch(rmsnorm_backward_workspace_bytes(rows, dim), "rmsnorm_backward");
  cuda::rmsnorm_backward(dx.data, dweight.f32(), dout.data, x.data, weight.data, rstd.f32(), rows, dim, act, ws,
                         stream_.get());
}

// ---- linear ----

void CudaBackend::linear_forward(Tensor out, Tensor x, Tensor weight) {
  const DType act = act_of("linear_forward", {&x, &weight});
  expect_device(out, "linear out");
  const std::int64_t n = x.shape.rows(), in = x.shape.last(), o = weight.shape[0];
  USTRAIN_ASSERT(weight.shape.rank() == 2 && weight.shape.last() == in && out.shape.rows() == n && out.shape.last() == o,
                 "linear: x " + x.shape.str() + ", weight " + weight.shape.str() + ", out " + out.shape.str());
  gemm_->linear_forward(out.data, out.dtype, x.data, weight.data, n, in, o, act, stream_.get());
}

void CudaBackend::linear_backward_input(Tensor dx, Tensor dout, Tensor weight) {
  const DType act = act_of("linear_backward_input", {&dx, &dout, &weight});
  const std::int64_t n = dout.shape.rows(), o = weight.shape[0], in = weight.shape[1];
  USTRAIN_ASSERT(weight.shape.rank() == 2 && dout.shape.last() == o && dx.shape.rows() == n && dx.shape.last() == in,
                 "linear backward input: dx " + dx.shape.str() + ", dout " + dout.shape.str() + ", weight " +
                     weight.shape.str());
  gemm_->linear_backward_input(dx.data, dout.data, weight.data, n, in, o, act, stream_.get());
}

void CudaBackend::linear_backward_weight(Tensor dweight, Tensor dout, Tensor x) {
  const DType act = act_of("linear_backward_weight", {&x, &dout});
  expect_device(dweight, "linear dweight");
  const std::int64_t n = x.shape.rows(), in = x.shape.last(), o = dweight.shape[0];
  USTRAIN_ASSERT(dweight.shape.rank() == 2 && dweight.shape[1] == in && dout.shape.rows() == n && dout.shape.last() == o,
                 "linear backward weight: x " + x.shape.str() + ", dout " + dout.shape.str() + ", dweight " +
                     dweight.shape.str());
  gemm_->linear_backward_weight(dweight.data, dweight.dtype, dout.data, x.data, n, in, o, act, stream_.get());
}

// ---- RoPE ----

void CudaBackend::rope_tables(Tensor cos, Tensor sin, std::span<const double> inv_freq, std::int64_t first_position) {
  expect_f32(cos, "rope cos");
  expect_f32(sin, "rope sin");
  // Computed once per run on the host, by the reference itself: the tables match it bit for bit.
  std::vector<float> host_cos(static_cast<std::size_t>(cos.numel())), host_sin(host_cos.size());
  CpuBackend host(1);
  host.rope_tables(Tensor(host_cos.data(), cos.shape), Tensor(host_sin.data(), sin.shape), inv_freq, first_position);
  copy(cos, Tensor(host_cos.data(), cos.shape));
  copy(sin, Tensor(host_sin.data(), sin.shape));
}

void CudaBackend::rope(Tensor qkv, Tensor cos, Tensor sin, int rotated_heads, int head_dim, bool inverse) {
  const DType act = act_of("rope", {&qkv});
  expect_f32(cos, "rope cos");
  expect_f32(sin, "rope sin");
  USTRAIN_ASSERT(qkv.shape.rank() == 3, "rope: qkv must be (B, S, W), got " + qkv.shape.str());
  const std::int64_t batch = qkv.shape[0], seq = qkv.shape[1], width = qkv.shape[2];
  USTRAIN_ASSERT(head_dim % 2 == 0 && cos.shape.rank() == 2 && cos.shape[1] == head_dim / 2 && cos.shape[0] >= seq &&
                     sin.shape == cos.shape && static_cast<std::int64_t>(rotated_heads) * head_dim <= width,
                 "rope: qkv " + qkv.shape.str() + ", tables " + cos.shape.str() + ", " + std::to_string(rotated_heads) +
                     " heads of " + std::to_string(head_dim));
  cuda::rope_apply(qkv.data, cos.f32(), sin.f32(), batch, seq, width, rotated_heads, head_dim, inverse, act,
                   stream_.get());
}

void CudaBackend::rope_forward(Tensor qkv, Tensor cos, Tensor sin, int rotated_heads, int head_dim) {
  rope(qkv, cos, sin, rotated_heads, head_dim, /*inverse=*/false);
}

void CudaBackend::rope_backward(Tensor dqkv, Tensor cos, Tensor sin, int rotated_heads, int head_dim) {
  rope(dqkv, cos, sin, rotated_heads, head_dim, /*inverse=*/true);
}

// ---- SwiGLU, add ----

void CudaBackend::swiglu_forward(Tensor out, Tensor gate_up) {
  const DType act = act_of("swiglu_forward", {&gate_up, &out});
  const std::int64_t rows = gate_up.shape.rows(), ffn = out.shape.last();
  USTRAIN_ASSERT(gate_up.shape.last() == 2 * ffn && out.shape.rows() == rows,
                 "swiglu: gate_up " + gate_up.shape.str() + ", out " + out.shape.str());
  cuda::swiglu_forward(out.data, gate_up.data, rows, ffn, act, stream_.get());
}

void CudaBackend::swiglu_backward(Tensor dgate_up, Tensor dout, Tensor gate_up) {
  const DType act = act_of("swiglu_backward", {&gate_up, &dgate_up, &dout});
  const std::int64_t rows = gate_up.shape.rows(), ffn = dout.shape.last();
  USTRAIN_ASSERT(gate_up.shape.last() == 2 * ffn && dout.shape.rows() == rows && dgate_up.shape == gate_up.shape,
                 "swiglu backward: gate_up " + gate_up.shape.str() + ", dout " + dout.shape.str());
  cuda::swiglu_backward(dgate_up.data, dout.data, gate_up.data, rows, ffn, act, stream_.get());
}

void CudaBackend::add(Tensor out, Tensor a, Tensor b) {
  const DType act = act_of("add", {&out, &a, &b});
  USTRAIN_ASSERT(a.numel() == out.numel() && b.numel() == out.numel(),
                 "add " + a.shape.str() + " + " + b.shape.str() + " -> " + out.shape.str());
  cuda::add(out.data, a.data, b.data, out.numel(), act, stream_.get());
}

// ---- cross-entropy ----

void CudaBackend::cross_entropy_forward(Tensor losses, Tensor lse, Tensor logits, Tensor targets) {
  const DType act = act_of("cross_entropy_forward", {&logits});
  expect_f32(losses, "cross-entropy losses");
  expect_f32(lse, "cross-entropy lse");
  expect_i32(targets, "cross-entropy targets");
  const std::int64_t rows = logits.shape.rows(), vocab = logits.shape.last();
  USTRAIN_ASSERT(losses.numel() == rows && lse.numel() == rows && targets.numel() == rows,
                 "cross-entropy: logits " + logits.shape.str() + ", losses " + losses.shape.str());
  cuda::cross_entropy_forward(losses.f32(), lse.f32(), logits.data, static_cast<const std::int32_t*>(targets.data),
                              rows, vocab, act, stream_.get());
}

void CudaBackend::cross_entropy_backward(Tensor dlogits, Tensor logits, Tensor lse, Tensor targets, float dloss) {
  const DType act =
      check_cross_entropy_backward("cross_entropy_backward", "cross-entropy backward", dlogits, logits, lse, targets);
  const std::int64_t rows = logits.shape.rows(), vocab = logits.shape.last();
  cuda::cross_entropy_backward(dlogits.data, logits.data, lse.f32(), static_cast<const std::int32_t*>(targets.data),
                               rows, vocab, dloss, act, stream_.get());
}

void CudaBackend::cross_entropy_shard_stats(Tensor stats, Tensor logits, Tensor targets, VocabShard shard) {
  const DType act = act_of("cross_entropy_shard_stats", {&logits});
  expect_f32(stats, "cross-entropy shard stats");
  expect_i32(targets, "cross-entropy targets");
  const std::int64_t rows = logits.shape.rows(), width = logits.shape.last();
  USTRAIN_ASSERT(stats.numel() == 2 * rows && targets.numel() == rows,
                 "cross-entropy shard stats: logits " + logits.shape.str() + ", stats " + stats.shape.str());
  cuda::cross_entropy_shard_stats(stats.f32(), logits.data, static_cast<const std::int32_t*>(targets.data), rows,
                                  width, shard.begin, shard.valid, act, stream_.get());
}

void CudaBackend::cross_entropy_combine(Tensor losses, Tensor lse, Tensor parts, Tensor targets) {
  expect_f32(losses, "cross-entropy losses");
  expect_f32(lse, "cross-entropy lse");
  expect_f32(parts, "cross-entropy shard stats");
  expect_i32(targets, "cross-entropy targets");
  const std::int64_t rows = targets.numel();
  USTRAIN_ASSERT(rows > 0 && parts.numel() % (2 * rows) == 0 && losses.numel() == rows && lse.numel() == rows,
                 "cross-entropy combine: parts " + parts.shape.str() + ", losses " + losses.shape.str());
  cuda::cross_entropy_combine(losses.f32(), lse.f32(), parts.f32(), static_cast<const std::int32_t*>(targets.data),
                              rows, parts.numel() / (2 * rows), stream_.get());
}

void CudaBackend::cross_entropy_backward_shard(Tensor dlogits, Tensor logits, Tensor lse, Tensor targets, float dloss,
                                               VocabShard shard) {
  const DType act = check_cross_entropy_backward("cross_entropy_backward_shard", "cross-entropy shard backward",
                                                 dlogits, logits, lse, targets);
  const std::int64_t rows = logits.shape.rows(), width = logits.shape.last();
  cuda::cross_entropy_backward_shard(dlogits.data, logits.data, lse.f32(),
                                     static_cast<const std::int32_t*>(targets.data), rows, width, shard.begin,
                                     shard.valid, dloss, act, stream_.get());
}

// ---- optimizer ----

void CudaBackend::adamw(Tensor param, Tensor grad, Tensor m, Tensor v, const AdamWParams& p) {
  const AdamWTensors range{param, grad, m, v, p.weight_decay, Tensor()};
  adamw_multi(std::span(&range, 1), p);
}

void CudaBackend::adamw_multi(std::span<const AdamWTensors> ranges, const AdamWParams& p) {
  USTRAIN_ASSERT(p.step >= 1, "adamw step is 1-based");
  std::vector<AdamWSegment> segments;
  segments.reserve(ranges.size());
  DType copy_dtype = DType::f32;  // of every compute copy: one kernel writes them all
  bool has_copy = false;
  for (const AdamWTensors& r : ranges) {
    expect_f32(r.param, "adamw param");
    expect_f32(r.grad, "adamw grad");
    expect_f32(r.m, "adamw m");
    expect_f32(r.v, "adamw v");
    const std::int64_t n = r.param.numel();
    USTRAIN_ASSERT(r.grad.numel() == n && r.m.numel() == n && r.v.numel() == n, "adamw tensors differ in size");
    if (!r.compute_copy.empty()) {
      expect_device(r.compute_copy, "adamw compute copy");
      USTRAIN_ASSERT(r.compute_copy.numel() == n && is_act(r.compute_copy.dtype) &&
                         (!has_copy || r.compute_copy.dtype == copy_dtype),
                     "adamw compute copies need the parameters' sizes and one activation dtype");
      copy_dtype = r.compute_copy.dtype;
      has_copy = true;
    }
    segments.push_back({r.param.f32(), r.grad.f32(), r.m.f32(), r.v.f32(), n, r.weight_decay,
                        r.compute_copy.empty() ? nullptr : r.compute_copy.data});
  }
  const AdamWHyper hyper{p.lr, p.beta1, p.beta2, p.eps, p.step, p.grad_scale};
  cuda::adamw(segments.data(), static_cast<int>(segments.size()), hyper, copy_dtype, stream_.get());
}

double CudaBackend::sum_of_squares(Tensor x) { return sum_of_squares_multi(std::span(&x, 1)); }

double CudaBackend::sum_of_squares_multi(std::span<const Tensor> xs) {
  std::vector<const void*> tensors;
  std::vector<std::int64_t> sizes;
  for (const Tensor& x : xs) {
    expect_f32(x, "sum_of_squares x");
    tensors.push_back(x.data);
    sizes.push_back(x.numel());
  }
  void* ws = scratch(sum_of_squares_workspace_bytes(), "sum_of_squares");
  cuda::sum_of_squares(reduce_result_, tensors.data(), sizes.data(), static_cast<int>(tensors.size()), DType::f32, ws,
                       stream_.get());
  double result = 0;
  USTRAIN_CUDA_CHECK(cudaMemcpyAsync(&result, reduce_result_, sizeof result, cudaMemcpyDeviceToHost, stream_.get()));
  synchronize();
  return result;
}

void CudaBackend::scale(Tensor x, float factor) {
  expect_f32(x, "scale x");
  cuda::scale(x.data, factor, x.numel(), x.dtype, stream_.get());
}

}  // namespace ustrain::cuda
