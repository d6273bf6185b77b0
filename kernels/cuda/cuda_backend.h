// The CUDA backend: every op of kernels/backend.h on one GPU, in the activation dtype of its
// tensors (f32, bf16 or f16; see "dtypes" below), on one compute stream the backend owns.
//
// Dtypes: activations and the compute copies of weights are in one "act" dtype per call;
// per-row statistics (rstd, lse, losses), parameter gradients, master weights and AdamW
// moments are fp32; all arithmetic accumulates in fp32. GEMMs run through cuBLASLt (fp32
// accumulate), attention (the block ops, kernels/cuda/attention/cuda_backend_blocks.cpp) through cuDNN's
// fused flash attention where cuDNN supports the shape and through our own kernels elsewhere
// (kernels/cuda/attention/attention_blocks.h; which shapes, and USTRAIN_REQUIRE_CUDNN=1:
// kernels/cuda/attention/cudnn_attention.h). Starting, it logs
// the CUDA driver, runtime, cuBLASLt and cuDNN versions it found (kernels/cuda/cuda_versions.h).
//
// Memory: planned arenas come from allocate() (one cudaMalloc each, outside any step), the
// planned library workspace among them: cuBLASLt's, handed over by use_library_workspace()
// (kernels/library_workspace.h; without a plan it allocates its own at the first GEMM), and
// the planned op scratch, handed over by use_op_scratch(): every op that needs scratch, cuDNN
// attention's staging and plan workspace included, takes it from there, one op at a time on
// the stream. The plan sized it from the step's ops (op_scratch_bytes(), which plans cuDNN
// for the step's attention shapes at start-up); an op that needs more is an internal error
// naming the op and the sizes. Without a plan (tests) ops share one grow-only buffer instead.
// Running out of device memory in any of these is a UserError naming what and how to fit. Host<->device copies synchronise, so
// host memory is safe to reuse when copy() returns; everything else is asynchronous on the
// compute stream until synchronize().
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>

#include "kernels/backend.h"
#include "kernels/cuda/cuda_resources.h"

namespace ustrain::cuda {

class LtGemm;
class GroupedGemm;
class CudnnAttention;

class CudaBackend : public Backend {
 public:
  // Uses GPU `device_index`; throws UserError when it cannot be used.
  explicit CudaBackend(int device_index = 0);
  ~CudaBackend() override;
  CudaBackend(const CudaBackend&) = delete;
  CudaBackend& operator=(const CudaBackend&) = delete;

  Device device() const override { return Device::cuda; }
  std::string name() const override { return name_; }
  cudaStream_t stream() const { return stream_.get(); }
  int device_index() const { return device_index_; }

  void* allocate(std::size_t bytes) override;
  void release(void* p) override;
  void copy(Tensor dst, const Tensor& src) override;
  void fill(Tensor dst, float value) override;
  void convert(Tensor dst, const Tensor& src) override;
  void synchronize() override;
  CUstream_st* compute_stream() const override { return stream_.get(); }
  std::size_t peak_device_bytes() const override;
  std::size_t available_memory_bytes() const override;
  std::string memory_name() const override { return "GPU " + std::to_string(device_index_); }
  void use_library_workspace(void* workspace, std::size_t bytes) override;
  std::size_t op_scratch_bytes(const RecordedOp& op) override;
  void use_op_scratch(void* scratch, std::size_t bytes) override;
  HostStaging allocate_host_staging(std::size_t bytes, const char* what) override;  // page-locked

  void embedding_forward(Tensor out, Tensor ids, Tensor table) override;
  void embedding_backward(Tensor dtable, Tensor ids, Tensor dout) override;
  void embedding_forward_shard(Tensor out, Tensor ids, Tensor table, VocabShard shard) override;
  void embedding_backward_shard(Tensor dtable, Tensor ids, Tensor dout, VocabShard shard) override;

  void rmsnorm_forward(Tensor out, Tensor rstd, Tensor x, Tensor weight, float eps) override;
  void rmsnorm_backward(Tensor dx, Tensor dweight, Tensor dout, Tensor x, Tensor weight, Tensor rstd) override;

  void linear_forward(Tensor out, Tensor x, Tensor weight) override;
  void linear_backward_input(Tensor dx, Tensor dout, Tensor weight) override;
  void linear_backward_weight(Tensor dweight, Tensor dout, Tensor x) override;

  // Grouped linear layers as one cuBLAS grouped GEMM (defined in cuda_backend_grouped.cpp;
  // kernels/cuda/gemm/grouped_gemm.h): the groups with rows, each its own GEMM. Weight gradients in
  // fp32 from 16-bit activations are a type combination cuBLAS's grouped GEMM does not take:
  // those run the per-group loop of cuBLASLt GEMMs, as does any call it cannot take.
  void grouped_linear_forward(Tensor out, Tensor x, std::span<const Tensor> weights,
                              std::span<const std::int64_t> offsets) override;
  void grouped_linear_backward_input(Tensor dx, Tensor dout, std::span<const Tensor> weights,
                                     std::span<const std::int64_t> offsets) override;
  void grouped_linear_backward_weight(std::span<const Tensor> dweights, Tensor dout, Tensor x,
                                      std::span<const std::int64_t> offsets) override;

  void rope_tables(Tensor cos, Tensor sin, std::span<const double> inv_freq, std::int64_t first_position) override;
  void rope_forward(Tensor qkv, Tensor cos, Tensor sin, int rotated_heads, int head_dim) override;
  void rope_backward(Tensor dqkv, Tensor cos, Tensor sin, int rotated_heads, int head_dim) override;


  // Attention over blocks of the sequence (defined in cuda_backend_blocks.cpp).
  void attention_kv_pack(Tensor kv, Tensor qkv, int n_heads, int n_kv_heads) override;
  void attention_block_forward(Tensor out, Tensor lse, Tensor qkv, SeqRange q, Tensor kv, SeqRange k,
                               AttentionMask mask, int n_heads, int n_kv_heads) override;
  void attention_merge(Tensor acc, Tensor lse, Tensor block_out, Tensor block_lse, SeqRange q) override;
  void attention_block_backward(Tensor dq, Tensor dkv, Tensor dout, Tensor qkv, SeqRange q, Tensor kv, SeqRange k,
                                Tensor out, Tensor lse, AttentionMask mask, int n_heads, int n_kv_heads) override;
  void attention_grad_pack(Tensor dqkv, Tensor dq, Tensor dkv) override;

  // Mixture-of-experts routing and combine (defined in cuda_backend_moe.cpp).
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
  void adamw_multi(std::span<const AdamWTensors> ranges, const AdamWParams& p) override;
  double sum_of_squares(Tensor x) override;
  double sum_of_squares_multi(std::span<const Tensor> xs) override;
  void scale(Tensor x, float factor) override;

 protected:
  // At least `bytes` of device scratch for the op `op` names, valid until the next op's.
  void* scratch(std::size_t bytes, std::string_view op);

 private:
  void rope(Tensor qkv, Tensor cos, Tensor sin, int rotated_heads, int head_dim, bool inverse);

  int device_index_;
  std::string name_;
  Stream stream_;
  DeviceScratch scratch_;  // without a planned op scratch
  void* planned_scratch_ = nullptr;
  std::size_t planned_scratch_bytes_ = 0;
  double* reduce_result_ = nullptr;  // one device double for sum_of_squares
  std::unique_ptr<LtGemm> gemm_;
  std::unique_ptr<GroupedGemm> grouped_;
  std::unique_ptr<CudnnAttention> attention_;  // USTRAIN_REQUIRE_CUDNN=1 makes its refusals errors
  std::unordered_map<void*, std::size_t> allocations_;  // planned arenas: pointer -> bytes
  std::size_t allocated_bytes_ = 0, peak_allocated_bytes_ = 0;
};

}  // namespace ustrain::cuda
