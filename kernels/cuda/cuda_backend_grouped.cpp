// The CUDA backend's grouped linear ops: every group with rows as one problem of a cuBLAS
// grouped GEMM (kernels/cuda/gemm/grouped_gemm.h), mapped onto column-major calls as the single
// linear ops are (kernels/cuda/gemm/gemm_plan.h); anything it does not take runs the per-group loop.
#include <vector>

#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_backend_checks.h"
#include "kernels/cuda/gemm/gemm_plan.h"
#include "kernels/cuda/gemm/grouped_gemm.h"
#include "kernels/group_offsets.h"

namespace ustrain::cuda {
namespace {

// A group's row-major operands, by the name a GemmCall gives them.
struct GroupOperands {
  const void* x = nullptr;
  const void* weight = nullptr;
  const void* dout = nullptr;
  const void* pick(LinearOperand which) const {
    switch (which) {
      case LinearOperand::x: return x;
      case LinearOperand::weight: return weight;
      case LinearOperand::dout: return dout;
    }
    return nullptr;
  }
};

GroupedProblem problem(const GemmCall& call, const GroupOperands& in, void* out) {
  return {call, in.pick(call.a), in.pick(call.b), out};
}

}  // namespace

void CudaBackend::grouped_linear_forward(Tensor out, Tensor x, std::span<const Tensor> weights,
                                         std::span<const std::int64_t> offsets) {
  const DType act = act_of("grouped_linear_forward", {&x});
  expect_device(out, "grouped linear out");
  const std::int64_t in = x.shape.last(), o = out.shape.last();
  USTRAIN_ASSERT(out.shape.rows() == x.shape.rows(), "grouped linear: x " + x.shape.str() + ", out " + out.shape.str());
  std::vector<GroupedProblem> problems;
  const auto add_problem = [&](std::size_t g, std::int64_t b, std::int64_t e) {
    (void)act_of("grouped_linear_forward", {&x, &weights[g]});
    USTRAIN_ASSERT(weights[g].shape.rank() == 2 && weights[g].shape[0] == o && weights[g].shape[1] == in,
                   "grouped linear: weight " + std::to_string(g) + " " + weights[g].shape.str() + " for x " +
                       x.shape.str() + " and out " + out.shape.str());
    problems.push_back(problem(plan_linear_forward(e - b, in, o), {x.slice(b, e).data, weights[g].data, nullptr},
                               out.slice(b, e).data));
  };
  for_each_nonempty_group("grouped_linear_forward", offsets, weights.size(), x.shape.rows(), add_problem);
  if (!GroupedGemm::supports(act, out.dtype, problems))
    return Backend::grouped_linear_forward(out, x, weights, offsets);
  grouped_->run(problems, act, out.dtype, stream_.get());
}

void CudaBackend::grouped_linear_backward_input(Tensor dx, Tensor dout, std::span<const Tensor> weights,
                                                std::span<const std::int64_t> offsets) {
  const DType act = act_of("grouped_linear_backward_input", {&dx, &dout});
  const std::int64_t in = dx.shape.last(), o = dout.shape.last();
  USTRAIN_ASSERT(dx.shape.rows() == dout.shape.rows(),
                 "grouped linear backward input: dx " + dx.shape.str() + ", dout " + dout.shape.str());
  std::vector<GroupedProblem> problems;
  const auto add_problem = [&](std::size_t g, std::int64_t b, std::int64_t e) {
    (void)act_of("grouped_linear_backward_input", {&dout, &weights[g]});
    USTRAIN_ASSERT(weights[g].shape.rank() == 2 && weights[g].shape[0] == o && weights[g].shape[1] == in,
                   "grouped linear backward input: weight " + std::to_string(g) + " " + weights[g].shape.str() +
                       " for dx " + dx.shape.str() + " and dout " + dout.shape.str());
    problems.push_back(problem(plan_linear_backward_input(e - b, in, o),
                               {nullptr, weights[g].data, dout.slice(b, e).data}, dx.slice(b, e).data));
  };
  for_each_nonempty_group("grouped_linear_backward_input", offsets, weights.size(), dout.shape.rows(), add_problem);
  if (!GroupedGemm::supports(act, dx.dtype, problems))
    return Backend::grouped_linear_backward_input(dx, dout, weights, offsets);
  grouped_->run(problems, act, dx.dtype, stream_.get());
}

void CudaBackend::grouped_linear_backward_weight(std::span<const Tensor> dweights, Tensor dout, Tensor x,
                                                 std::span<const std::int64_t> offsets) {
  const DType act = act_of("grouped_linear_backward_weight", {&x, &dout});
  const std::int64_t in = x.shape.last(), o = dout.shape.last();
  USTRAIN_ASSERT(dout.shape.rows() == x.shape.rows(),
                 "grouped linear backward weight: x " + x.shape.str() + ", dout " + dout.shape.str());
  std::vector<GroupedProblem> problems;
  DType dw_type = act;  // every gradient's: one grouped call has one C type
  bool one_type = true;
  const auto add_problem = [&](std::size_t g, std::int64_t b, std::int64_t e) {
    expect_device(dweights[g], "grouped linear dweight");
    USTRAIN_ASSERT(dweights[g].shape.rank() == 2 && dweights[g].shape[0] == o && dweights[g].shape[1] == in,
                   "grouped linear backward weight: dweight " + std::to_string(g) + " " + dweights[g].shape.str() +
                       " for x " + x.shape.str() + " and dout " + dout.shape.str());
    if (problems.empty()) dw_type = dweights[g].dtype;
    one_type = one_type && dweights[g].dtype == dw_type;
    problems.push_back(problem(plan_linear_backward_weight(e - b, in, o),
                               {x.slice(b, e).data, nullptr, dout.slice(b, e).data}, dweights[g].data));
  };
  for_each_nonempty_group("grouped_linear_backward_weight", offsets, dweights.size(), x.shape.rows(), add_problem);
  // fp32 gradients of bf16 / fp16 layers (every mixed-precision run): cuBLAS's grouped GEMM is
  // not known to take an fp32 C from 16-bit A and B (its documented type table was not at hand),
  // so these stay one cuBLASLt GEMM per group.
  if (!one_type || !GroupedGemm::supports(act, dw_type, problems))
    return Backend::grouped_linear_backward_weight(dweights, dout, x, offsets);
  grouped_->run(problems, act, dw_type, stream_.get());
}

}  // namespace ustrain::cuda
