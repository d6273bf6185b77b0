// The CUDA backend with train.precision = "fp8", the GPU counterpart of CpuFp8Backend
// (kernels/cpu/cpu_fp8_backend.h): bf16 everywhere (CudaBackend), except the GEMMs of the
// linear layers added to fp8_layers(), which run as cuBLASLt FP8 GEMMs on operands quantised
// on the GPU with their recipe's scales (kernels/cuda/fp8/fp8_linear.h). Layers not added (the
// output head, routers) and non-bf16 calls stay on CudaBackend's GEMMs.
//
// Delayed scaling keeps the host's LayerScaling states as they are (checkpoints, the amax
// reduction over ranks): each state's three scales are copied to the device by the first FP8
// GEMM after Fp8Layers::generation() moved (a step began or ended; a copy from pageable memory,
// which waits for the stream), the GEMMs max their operands' amaxes into device floats, and
// Fp8Layers::collect_amaxes() brings those to the host once at the step's end. So a step waits
// for the GPU at its first FP8 GEMM and at its end, never per GEMM.
//
// Memory: the quantised operands live in the op scratch (the plan sizes it with
// fp8_linear_scratch_bytes, core/step/fp8_layers.h); the FP8 GEMMs share the planned cuBLASLt
// workspace (without a plan they allocate their own at the first call); the delayed states'
// device copies (24 bytes per GEMM key) are allocated here and counted in peak_device_bytes().
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <vector>

#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/fp8/fp8_linear.h"
#include "kernels/fp8/fp8_layers.h"

namespace ustrain::cuda {

class LtFp8Gemm;

class CudaFp8Backend final : public CudaBackend, private fp8::AmaxSource {
 public:
  // Throws UserError when the GPU cannot run the recipe's FP8 GEMMs: tensor scales (delayed,
  // current) need sm_89 or later, row and block scales (rowwise, blockwise) sm_90.
  CudaFp8Backend(int device_index, const fp8::Config& config);
  ~CudaFp8Backend() override;

  fp8::Fp8Layers* fp8_layers() override { return &layers_; }
  std::size_t peak_device_bytes() const override;
  void use_library_workspace(void* workspace, std::size_t bytes) override;

  void linear_forward(Tensor out, Tensor x, Tensor weight) override;
  void linear_backward_input(Tensor dx, Tensor dout, Tensor weight) override;
  void linear_backward_weight(Tensor dweight, Tensor dout, Tensor x) override;
  // Grouped layers run their groups through the linear ops above, one by one (the base
  // class's loop), never through CudaBackend's grouped GEMM: a group whose layer computes in
  // FP8 must not silently compute in bf16.
  void grouped_linear_forward(Tensor out, Tensor x, std::span<const Tensor> weights,
                              std::span<const std::int64_t> offsets) override {
    Backend::grouped_linear_forward(out, x, weights, offsets);
  }
  void grouped_linear_backward_input(Tensor dx, Tensor dout, std::span<const Tensor> weights,
                                     std::span<const std::int64_t> offsets) override {
    Backend::grouped_linear_backward_input(dx, dout, weights, offsets);
  }
  void grouped_linear_backward_weight(std::span<const Tensor> dweights, Tensor dout, Tensor x,
                                      std::span<const std::int64_t> offsets) override {
    Backend::grouped_linear_backward_weight(dweights, dout, x, offsets);
  }

 private:
  void discard() override;
  void record_into(fp8::Fp8Layers& layers) override;

  // The device copy of `state` (delayed scaling; empty otherwise), its scales current.
  Fp8DeviceScaling device_state(const fp8::LayerScaling* state);
  void* workspace();
  void* fp8_scratch(std::int64_t n, std::int64_t in, std::int64_t out, const char* op);

  fp8::Fp8Layers layers_;
  std::unique_ptr<LtFp8Gemm> fp8_gemm_;
  std::unique_ptr<Fp8Linear> linear_;
  void* planned_workspace_ = nullptr;
  void* own_workspace_ = nullptr;
  // Delayed scaling: the states in name order, each a slot of kRoles scales then, after all
  // the scales, kRoles amaxes, in one device buffer.
  std::vector<fp8::LayerScaling*> slot_states_;
  std::map<const fp8::LayerScaling*, std::size_t> slot_of_;
  float* device_state_ = nullptr;
  std::vector<float> host_state_;
  std::uint64_t uploaded_generation_ = ~std::uint64_t{0};
};

}  // namespace ustrain::cuda
