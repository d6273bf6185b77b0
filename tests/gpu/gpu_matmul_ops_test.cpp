// The CUDA ops built on matrix multiplies against the CPU reference: linear (cuBLASLt) and
// causal grouped-query attention of whole sequences, a self block each way (cuDNN's fused
// attention where it applies, our block kernels elsewhere). Their outputs sum over a long dimension, so every comparison is
// norm-wise (see gpu_test_support.h).
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "gpu_test_support.h"
#include "tests/unit/kernels/whole_attention.h"

namespace ustrain::gpu_test {
namespace {

class GpuMatmulTest : public GpuActTest {};

// ---- linear ----

struct LinearCase {
  std::int64_t batch, seq, in, out;  // x (batch, seq, in) or, for batch 0, (seq, in)
  Shape x_shape() const { return batch ? Shape{batch, seq, in} : Shape{seq, in}; }
  Shape out_shape() const { return batch ? Shape{batch, seq, out} : Shape{seq, out}; }
  std::int64_t rows() const { return (batch ? batch : 1) * seq; }
  std::string str() const {
    return "N=" + std::to_string(rows()) + " I=" + std::to_string(in) + " O=" + std::to_string(out);
  }
};
// Odd sizes (no multiple of 8 anywhere), a single row, a 3-D input, and a model-sized GEMM.
const LinearCase kLinearCases[] = {
    {0, 64, 128, 96}, {0, 37, 61, 29}, {0, 1, 17, 3}, {2, 65, 200, 300}, {0, 256, 2048, 1536}};

TEST_P(GpuMatmulTest, LinearForwardAndBackwardMatchCpu) {
  for (const auto& c : kLinearCases) {
    const Shape xs = c.x_shape(), os = c.out_shape(), ws{c.out, c.in};
    auto x = random_values(static_cast<std::size_t>(xs.numel()), 30, act());
    auto w = random_values(static_cast<std::size_t>(ws.numel()), 31, act());
    auto dout = random_values(static_cast<std::size_t>(os.numel()), 32, act());
    const auto prefill = random_values(w.size(), 33, DType::f32);  // dweight accumulates

    std::vector<float> out(static_cast<std::size_t>(os.numel())), dx(x.size());
    auto dweight = prefill;
    cpu().linear_forward(host(out, os), host(x, xs), host(w, ws));
    cpu().linear_backward(host(dx, xs), host(dweight, ws), host(dout, os), host(x, xs), host(w, ws));

    auto gx = on_device(gpu(), x, xs, act()), gw = on_device(gpu(), w, ws, act());
    auto gdout = on_device(gpu(), dout, os, act()), gdweight = on_device(gpu(), prefill, ws, DType::f32);
    DeviceTensor gout(gpu(), os, act()), gdx(gpu(), xs, act());
    gpu().linear_forward(gout, *gx, *gw);
    gpu().linear_backward(gdx, *gdweight, *gdout, *gx, *gw);
    const std::string at = c.str();
    expect_close(gout.download(), out, act_tolerance(act(), Measure::norm_rel), "linear out " + at);
    expect_close(gdx.download(), dx, act_tolerance(act(), Measure::norm_rel), "linear dx " + at);
    // The weight gradient is an fp32 sum of products of the same act values.
    expect_close(gdweight->download(), dweight, fp32_tolerance(Measure::norm_rel), "linear dweight " + at);

    // Without dx (the first layer's input needs no gradient) dweight still accumulates: again.
    cpu().linear_backward(Tensor(), host(dweight, ws), host(dout, os), host(x, xs), host(w, ws));
    gpu().linear_backward(Tensor(), *gdweight, *gdout, *gx, *gw);
    expect_close(gdweight->download(), dweight, fp32_tolerance(Measure::norm_rel), "linear dweight, no dx " + at);
  }
}

// ---- attention ----

struct AttentionCase {
  std::int64_t batch, seq, heads, kv_heads, head_dim;
  std::int64_t width() const { return (heads + 2 * kv_heads) * head_dim; }
  Shape qkv_shape() const { return {batch, seq, width()}; }
  Shape out_shape() const { return {batch, seq, heads * head_dim}; }
  Shape lse_shape() const { return {batch, heads, seq}; }
  std::string str() const {
    return "B=" + std::to_string(batch) + " S=" + std::to_string(seq) + " H=" + std::to_string(heads) +
           " Hkv=" + std::to_string(kv_heads) + " Dh=" + std::to_string(head_dim);
  }
};
// GQA at the benchmark's head size (cuDNN's path in bf16), a long sequence, an odd head size
// and length, full multi-head at Dh 128, and multi-query with a tiny head; last, Dh 12, which
// cuDNN must refuse (not a multiple of 8): our kernel in every dtype, under
// USTRAIN_REQUIRE_CUDNN=1 too.
const AttentionCase kAttentionCases[] = {{2, 128, 8, 2, 64}, {1, 1024, 8, 2, 64}, {1, 77, 4, 2, 40},
                                         {2, 200, 4, 4, 128}, {3, 9, 6, 1, 16},   {2, 33, 4, 2, 12}};

// The q, k and v parts of every row of a (B, S, W) tensor, so that each gradient is checked
// on its own (a wrong dK hides easily in the norm of all three).
std::vector<std::vector<float>> split_qkv(const std::vector<float>& t, const AttentionCase& c) {
  std::vector<std::vector<float>> parts(3);
  const std::int64_t bounds[] = {0, c.heads * c.head_dim, (c.heads + c.kv_heads) * c.head_dim, c.width()};
  for (std::int64_t row = 0; row < c.batch * c.seq; ++row)
    for (int p = 0; p < 3; ++p)
      parts[static_cast<std::size_t>(p)].insert(parts[static_cast<std::size_t>(p)].end(),
                                                t.begin() + row * c.width() + bounds[p],
                                                t.begin() + row * c.width() + bounds[p + 1]);
  return parts;
}

TEST_P(GpuMatmulTest, AttentionForwardAndBackwardMatchCpu) {
  for (const auto& c : kAttentionCases) {
    const Shape qs = c.qkv_shape(), os = c.out_shape(), ls = c.lse_shape();
    const int h = static_cast<int>(c.heads), hkv = static_cast<int>(c.kv_heads);
    // Inputs in [-2, 2] make the softmax peaked enough that a wrong scale or mask shows.
    auto qkv = random_values(static_cast<std::size_t>(qs.numel()), 40, act(), -2.0f, 2.0f);
    auto dout = random_values(static_cast<std::size_t>(os.numel()), 41, act());

    std::vector<float> out(static_cast<std::size_t>(os.numel())), lse(static_cast<std::size_t>(ls.numel()));
    std::vector<float> dqkv(qkv.size());
    test::whole_attention_forward(cpu(), host(out, os), host(lse, ls), host(qkv, qs), h, hkv);
    test::whole_attention_backward(cpu(), host(dqkv, qs), host(dout, os), host(qkv, qs), host(out, os), host(lse, ls),
                                   h, hkv);

    auto gqkv = on_device(gpu(), qkv, qs, act()), gdout = on_device(gpu(), dout, os, act());
    DeviceTensor gout(gpu(), os, act()), glse(gpu(), ls, DType::f32), gdqkv(gpu(), qs, act());
    gpu().fill(gdqkv, 1234.0f);  // overwritten, never accumulated
    test::whole_attention_forward(gpu(), gout, glse, *gqkv, h, hkv);
    test::whole_attention_backward(gpu(), gdqkv, *gdout, *gqkv, gout, glse, h, hkv);

    const std::string at = c.str();
    expect_close(gout.download(), out, act_tolerance(act(), Measure::norm_rel), "attention out " + at);
    // lse sums exponentials of fp32 scores of the same act inputs: no act rounding inside.
    expect_close(glse.download(), lse, fp32_tolerance(Measure::norm_rel), "attention lse " + at);
    const auto got = split_qkv(gdqkv.download(), c), want = split_qkv(dqkv, c);
    const char* names[] = {"dq", "dk", "dv"};
    for (std::size_t p = 0; p < 3; ++p)
      expect_close(got[p], want[p], act_tolerance(act(), Measure::norm_rel),
                   std::string("attention ") + names[p] + " " + at);
  }
}

INSTANTIATE_TEST_SUITE_P(Act, GpuMatmulTest, ::testing::Values(DType::f32, DType::bf16, DType::f16), act_param_name);

}  // namespace
}  // namespace ustrain::gpu_test
