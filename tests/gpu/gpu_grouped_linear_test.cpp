// The grouped linear ops (a mixture of experts' GEMMs in one call) on the CUDA backend against
// the CPU reference, in fp32, bf16 and fp16: groups of different sizes with groups of no rows
// first, inside and last, every row in one group, and no rows at all. The forward and input
// gradient run as one cuBLAS grouped GEMM; the weight gradients too where they are in the
// activation dtype, while fp32 gradients of 16-bit layers run the per-group loop (a type
// combination cuBLAS's grouped GEMM does not take): both are checked. Every weight gradient
// starts from random values (they accumulate) and an empty group's must come back unchanged
// to the bit. Tolerances: gpu_test_support.h.
#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "gpu_test_support.h"

namespace ustrain::gpu_test {
namespace {

class GpuGroupedLinearTest : public GpuActTest {};

struct GroupedCase {
  std::vector<std::int64_t> sizes;  // rows per group
  std::int64_t in, out;

  std::vector<std::int64_t> offsets() const {
    std::vector<std::int64_t> o{0};
    for (std::int64_t s : sizes) o.push_back(o.back() + s);
    return o;
  }
  std::int64_t rows() const { return offsets().back(); }
  std::string str() const {
    std::string s = "groups";
    for (std::int64_t n : sizes) {
      s += ' ';
      s += std::to_string(n);
    }
    s += ", I=";
    s += std::to_string(in);
    s += ", O=";
    s += std::to_string(out);
    return s;
  }
};

// Sizes that are no multiple of a tile; 8 experts as in the MoE quickstart; all in one; none.
const GroupedCase kCases[] = {{{0, 37, 1, 0, 130, 64, 0}, 96, 80},
                              {{11, 0, 5, 300, 0, 2, 17, 9}, 64, 176},
                              {{0, 0, 200, 0}, 48, 40},
                              {{0, 0, 0}, 32, 16}};

// One device tensor per group.
std::vector<std::unique_ptr<DeviceTensor>> per_group(Backend& gpu, const std::vector<std::vector<float>>& values,
                                                     Shape shape, DType t) {
  std::vector<std::unique_ptr<DeviceTensor>> out;
  for (const auto& v : values) out.push_back(on_device(gpu, v, shape, t));
  return out;
}

std::vector<Tensor> tensors(const std::vector<std::unique_ptr<DeviceTensor>>& d) {
  std::vector<Tensor> t;
  for (const auto& p : d) t.push_back(p->tensor());
  return t;
}

std::vector<Tensor> host_tensors(std::vector<std::vector<float>>& v, Shape shape) {
  std::vector<Tensor> t;
  for (auto& x : v) t.push_back(host(x, shape));
  return t;
}

TEST_P(GpuGroupedLinearTest, ForwardAndInputGradientMatchCpu) {
  std::uint32_t seed = 70;
  for (const GroupedCase& c : kCases) {
    const std::int64_t n = c.rows();
    const std::vector<std::int64_t> offsets = c.offsets();
    const Shape xs{n, c.in}, os{n, c.out}, ws{c.out, c.in};
    auto x = random_values(static_cast<std::size_t>(xs.numel()), seed++, act());
    auto dout = random_values(static_cast<std::size_t>(os.numel()), seed++, act());
    std::vector<std::vector<float>> w;
    for (std::size_t g = 0; g < c.sizes.size(); ++g)
      w.push_back(random_values(static_cast<std::size_t>(ws.numel()), seed++, act()));

    std::vector<float> out(static_cast<std::size_t>(os.numel())), dx(x.size());
    cpu().grouped_linear_forward(host(out, os), host(x, xs), host_tensors(w, ws), offsets);
    cpu().grouped_linear_backward_input(host(dx, xs), host(dout, os), host_tensors(w, ws), offsets);

    auto gx = on_device(gpu(), x, xs, act()), gdout = on_device(gpu(), dout, os, act());
    auto gw = per_group(gpu(), w, ws, act());
    DeviceTensor gout(gpu(), os, act()), gdx(gpu(), xs, act());
    gpu().grouped_linear_forward(gout, *gx, tensors(gw), offsets);
    gpu().grouped_linear_backward_input(gdx, *gdout, tensors(gw), offsets);
    if (n == 0) continue;  // nothing to compare: the calls must only not fail
    const std::string at = c.str();
    expect_close(gout.download(), out, act_tolerance(act(), Measure::norm_rel), "grouped out, " + at);
    expect_close(gdx.download(), dx, act_tolerance(act(), Measure::norm_rel), "grouped dx, " + at);
  }
}

// dweights in `grad_type`: fp32 (parameter gradients) or the activation dtype.
void check_weight_gradients(Backend& gpu, CpuBackend& cpu, DType act, DType grad_type) {
  std::uint32_t seed = 170;
  for (const GroupedCase& c : kCases) {
    const std::int64_t n = c.rows();
    const std::vector<std::int64_t> offsets = c.offsets();
    const Shape xs{n, c.in}, os{n, c.out}, ws{c.out, c.in};
    auto x = random_values(static_cast<std::size_t>(xs.numel()), seed++, act);
    auto dout = random_values(static_cast<std::size_t>(os.numel()), seed++, act);
    std::vector<std::vector<float>> start;  // a running gradient in every group
    for (std::size_t g = 0; g < c.sizes.size(); ++g)
      start.push_back(random_values(static_cast<std::size_t>(ws.numel()), seed++, grad_type));

    auto dw = start;
    cpu.grouped_linear_backward_weight(host_tensors(dw, ws), host(dout, os), host(x, xs), offsets);
    auto gx = on_device(gpu, x, xs, act), gdout = on_device(gpu, dout, os, act);
    auto gdw = per_group(gpu, start, ws, grad_type);
    gpu.grouped_linear_backward_weight(tensors(gdw), *gdout, *gx, offsets);

    // fp32 gradients: an fp32 sum of products of the same act values (the fp32 bound); in act
    // the result carries act's rounding.
    const Tolerance tol =
        grad_type == DType::f32 ? fp32_tolerance(Measure::norm_rel) : act_tolerance(act, Measure::norm_rel);
    for (std::size_t g = 0; g < c.sizes.size(); ++g) {
      const std::vector<float> got = gdw[g]->download();
      const std::string at = c.str() + ", group " + std::to_string(g) + ", dweight " + dtype_name(grad_type);
      if (c.sizes[g] == 0) {
        EXPECT_TRUE(same_bits(got, start[g])) << "an empty group's gradient changed: " << at;
      } else {
        expect_close(got, dw[g], tol, "grouped dweight " + at);
      }
    }
  }
}

TEST_P(GpuGroupedLinearTest, Fp32WeightGradientsAccumulateAsOnTheCpu) {
  check_weight_gradients(gpu(), cpu(), act(), DType::f32);
}

TEST_P(GpuGroupedLinearTest, WeightGradientsInTheActivationDtypeAccumulateAsOnTheCpu) {
  check_weight_gradients(gpu(), cpu(), act(), act());
}

INSTANTIATE_TEST_SUITE_P(Act, GpuGroupedLinearTest, ::testing::Values(DType::f32, DType::bf16, DType::f16),
                         act_param_name);

}  // namespace
}  // namespace ustrain::gpu_test
