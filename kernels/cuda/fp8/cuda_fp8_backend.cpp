// CudaFp8Backend: the linear layers' FP8 GEMMs on CUDA (see cuda_fp8_backend.h).
#include "kernels/cuda/fp8/cuda_fp8_backend.h"

#include <cuda_runtime_api.h>

#include <string>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_resources.h"
#include "kernels/cuda/fp8/fp8_scratch_sizes.h"
#include "kernels/cuda/fp8/lt_fp8_gemm.h"
#include "kernels/error.h"
#include "kernels/fp8/fp8_gemm_applies.h"

namespace ustrain::cuda {
namespace {

// cuBLASLt's FP8 GEMMs take tensor scales from sm_89 on, and outer-vector and 128-block scales
// on sm_90 only (cuBLAS documentation, "Scaling Mode Support Overview").
void check_fp8_device(int device_index, fp8::Recipe recipe) {
  int major = 0, minor = 0;
  USTRAIN_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device_index));
  USTRAIN_CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device_index));
  const int sm = major * 10 + minor;
  const std::string gpu = "GPU " + std::to_string(device_index) + " is sm_" + std::to_string(sm);
  const bool tensor_scales = recipe == fp8::Recipe::delayed || recipe == fp8::Recipe::current;
  if (tensor_scales && sm < 89)
    throw UserError("train.precision = \"fp8\" needs a GPU with FP8 tensor cores (sm_89 or later) and " + gpu +
                    "; set train.precision = \"bf16\"");
  if (!tensor_scales && sm != 90)
    throw UserError(std::string("train.fp8_recipe = \"") + fp8::recipe_name(recipe) +
                    "\" on CUDA needs a Hopper GPU (sm_90: cuBLASLt's row and 128-block FP8 scales) and " + gpu +
                    "; set train.fp8_recipe = \"delayed\" or \"current\", or train.precision = \"bf16\"");
}

}  // namespace

CudaFp8Backend::CudaFp8Backend(int device_index, const fp8::Config& config)
    : CudaBackend(device_index), layers_(config), fp8_gemm_(std::make_unique<LtFp8Gemm>()) {
  check_fp8_device(device_index, config.recipe);
  linear_ = std::make_unique<Fp8Linear>(config, *fp8_gemm_);
  layers_.set_amax_source(this);
}

CudaFp8Backend::~CudaFp8Backend() {
  cudaStreamSynchronize(stream());  // nothing queued still uses what is freed below
  if (own_workspace_ != nullptr) cudaFree(own_workspace_);
  if (device_state_ != nullptr) cudaFree(device_state_);
}

std::size_t CudaFp8Backend::peak_device_bytes() const {
  return CudaBackend::peak_device_bytes() + (own_workspace_ != nullptr ? LtFp8Gemm::kWorkspaceBytes : 0) +
         2 * fp8::kRoles * slot_states_.size() * sizeof(float);
}

void CudaFp8Backend::use_library_workspace(void* workspace, std::size_t bytes) {
  CudaBackend::use_library_workspace(workspace, bytes);
  planned_workspace_ = workspace;
  if (workspace != nullptr && own_workspace_ != nullptr) {
    USTRAIN_CUDA_CHECK(cudaFree(own_workspace_));  // synchronises: no queued GEMM still uses it
    own_workspace_ = nullptr;
  }
}

void* CudaFp8Backend::workspace() {
  if (planned_workspace_ != nullptr) return planned_workspace_;
  if (own_workspace_ == nullptr) own_workspace_ = device_malloc(LtFp8Gemm::kWorkspaceBytes, "the FP8 GEMM workspace");
  return own_workspace_;
}

void* CudaFp8Backend::fp8_scratch(std::int64_t n, std::int64_t in, std::int64_t out, const char* op) {
  return scratch(fp8_linear_scratch_bytes(layers_.config().recipe, n, in, out), std::string(op) + " (fp8 operands)");
}

// ---- delayed scaling's device state ----

Fp8DeviceScaling CudaFp8Backend::device_state(const fp8::LayerScaling* state) {
  if (layers_.config().recipe != fp8::Recipe::delayed) return {};
  if (slot_of_.count(state) == 0) {  // layers were added since: lay the slots out again
    USTRAIN_CUDA_CHECK(cudaStreamSynchronize(stream()));
    std::vector<float> amaxes(slot_states_.size() * fp8::kRoles, 0.0f);
    if (device_state_ != nullptr) {  // keep the amaxes recorded so far
      USTRAIN_CUDA_CHECK(cudaMemcpy(amaxes.data(), device_state_ + amaxes.size(), amaxes.size() * sizeof(float),
                                    cudaMemcpyDeviceToHost));
      USTRAIN_CUDA_CHECK(cudaFree(device_state_));
      device_state_ = nullptr;
    }
    std::vector<fp8::LayerScaling*> old = slot_states_;
    slot_states_.clear();
    slot_of_.clear();
    for (const auto& [name, s] : layers_.by_name()) {
      slot_of_[s] = slot_states_.size();
      slot_states_.push_back(s);
    }
    USTRAIN_ASSERT(slot_of_.count(state) == 1, "an FP8 GEMM key without a delayed-scaling state");
    const std::size_t floats = 2 * fp8::kRoles * slot_states_.size();
    device_state_ = static_cast<float*>(device_malloc(floats * sizeof(float), "the fp8 scaling state"));
    host_state_.assign(floats, 0.0f);
    for (std::size_t s = 0; s < old.size(); ++s) {  // amaxes of layers that were already there
      const std::size_t to = slot_of_.at(old[s]);
      for (int r = 0; r < fp8::kRoles; ++r)
        host_state_[fp8::kRoles * slot_states_.size() + to * fp8::kRoles + static_cast<std::size_t>(r)] =
            amaxes[s * fp8::kRoles + static_cast<std::size_t>(r)];
    }
    USTRAIN_CUDA_CHECK(cudaMemcpy(device_state_, host_state_.data(), floats * sizeof(float), cudaMemcpyHostToDevice));
    uploaded_generation_ = ~layers_.generation();  // the scales go up below
  }
  const std::size_t slots = slot_states_.size();
  if (uploaded_generation_ != layers_.generation()) {  // a step began or ended: the host's scales
    for (std::size_t s = 0; s < slots; ++s)
      for (int r = 0; r < fp8::kRoles; ++r)
        host_state_[s * fp8::kRoles + static_cast<std::size_t>(r)] = slot_states_[s]->scale(static_cast<fp8::Role>(r));
    // From pageable memory: the call waits for the stream and has read host_state_ when it returns.
    USTRAIN_CUDA_CHECK(cudaMemcpyAsync(device_state_, host_state_.data(), slots * fp8::kRoles * sizeof(float),
                                       cudaMemcpyHostToDevice, stream()));
    uploaded_generation_ = layers_.generation();
  }
  const std::size_t slot = slot_of_.at(state);
  return {device_state_ + slot * fp8::kRoles, device_state_ + (slots + slot) * fp8::kRoles};
}

void CudaFp8Backend::discard() {
  if (device_state_ == nullptr) return;
  const std::size_t n = slot_states_.size() * fp8::kRoles;
  USTRAIN_CUDA_CHECK(cudaMemsetAsync(device_state_ + n, 0, n * sizeof(float), stream()));
}

void CudaFp8Backend::record_into(fp8::Fp8Layers& layers) {
  USTRAIN_ASSERT(&layers == &layers_, "FP8 amaxes asked for by another backend's layers");
  if (device_state_ == nullptr) return;
  const std::size_t n = slot_states_.size() * fp8::kRoles;
  std::vector<float> amaxes(n);
  USTRAIN_CUDA_CHECK(cudaMemcpyAsync(amaxes.data(), device_state_ + n, n * sizeof(float), cudaMemcpyDeviceToHost,
                                     stream()));
  USTRAIN_CUDA_CHECK(cudaStreamSynchronize(stream()));  // the step's one wait for its amaxes
  for (std::size_t s = 0; s < slot_states_.size(); ++s)
    for (int r = 0; r < fp8::kRoles; ++r)
      slot_states_[s]->record(static_cast<fp8::Role>(r), amaxes[s * fp8::kRoles + static_cast<std::size_t>(r)]);
  discard();
}

// ---- linear ----

void CudaFp8Backend::linear_forward(Tensor out, Tensor x, Tensor weight) {
  const fp8::LayerScaling* state = layers_.find(weight.data);
  if (!fp8::fp8_gemm_applies(state != nullptr, out, DType::bf16, x, weight, weight))
    return CudaBackend::linear_forward(out, x, weight);
  const std::int64_t n = x.shape.rows(), in = x.shape.last(), o = weight.shape[0];
  USTRAIN_ASSERT(weight.shape.last() == in && out.shape.rows() == n && out.shape.last() == o,
                 "fp8 linear: x " + x.shape.str() + ", weight " + weight.shape.str() + ", out " + out.shape.str());
  const Fp8DeviceScaling dev = device_state(state);
  linear_->forward(out.data, x.data, weight.data, n, in, o, dev, fp8_scratch(n, in, o, "linear_forward"), workspace(),
                   stream());
}

void CudaFp8Backend::linear_backward_input(Tensor dx, Tensor dout, Tensor weight) {
  const fp8::LayerScaling* state = layers_.find(weight.data);
  if (!fp8::fp8_gemm_applies(state != nullptr, dx, DType::bf16, dout, weight, weight))
    return CudaBackend::linear_backward_input(dx, dout, weight);
  const std::int64_t n = dout.shape.rows(), o = weight.shape[0], in = weight.shape[1];
  USTRAIN_ASSERT(dout.shape.last() == o && dx.shape.rows() == n && dx.shape.last() == in,
                 "fp8 linear backward input: dx " + dx.shape.str() + ", dout " + dout.shape.str() + ", weight " +
                     weight.shape.str());
  const Fp8DeviceScaling dev = device_state(state);
  linear_->backward_input(dx.data, dout.data, weight.data, n, in, o, dev, fp8_scratch(n, in, o, "linear_backward_input"),
                          workspace(), stream());
}

void CudaFp8Backend::linear_backward_weight(Tensor dweight, Tensor dout, Tensor x) {
  const fp8::LayerScaling* state = layers_.find(dweight.data);
  if (!fp8::fp8_gemm_applies(state != nullptr, dweight, DType::f32, dout, x, dweight))
    return CudaBackend::linear_backward_weight(dweight, dout, x);
  const std::int64_t n = x.shape.rows(), in = x.shape.last(), o = dweight.shape[0];
  USTRAIN_ASSERT(dweight.shape[1] == in && dout.shape.rows() == n && dout.shape.last() == o,
                 "fp8 linear backward weight: x " + x.shape.str() + ", dout " + dout.shape.str() + ", dweight " +
                     dweight.shape.str());
  const Fp8DeviceScaling dev = device_state(state);
  linear_->backward_weight(dweight.f32(), dout.data, x.data, n, in, o, dev,
                           fp8_scratch(n, in, o, "linear_backward_weight"), workspace(), stream());
}

}  // namespace ustrain::cuda
