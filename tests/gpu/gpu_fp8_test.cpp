// FP8 on CUDA against the host: the quantising kernels bit for bit against fp8::encode and the
// scaling recipes of kernels/fp8/fp8_scaling.h, and the FP8 linear GEMMs (cuBLASLt) against
// CpuFp8Backend's emulation on the same inputs.
//
// Tolerances of the GEMMs. Both sides quantise the same bf16 inputs to the same FP8 codes with
// the same scales (checked exactly by the quantisation tests), and the product of two FP8
// values is exact in fp32; what differs is
//   - the order and precision of accumulation: the CPU sums the dequantised products in fp32;
//     cuBLASLt (Hopper tensor cores, fast accumulation off) accumulates FP8 products in the
//     tensor core's narrower adder and promotes partial sums to fp32, and applies the inverse
//     scales to the sums rather than to each operand (one fp32 rounding apart per product for
//     non-power-of-two scales). Over these sizes that is well under 1e-3 norm-wise;
//   - the final rounding to bf16 (forward and input gradient): each side rounds its fp32 sum
//     once; sums a hair apart may round to neighbouring bf16 values, one bf16 unit (2^-8
//     relative) for those elements, so at most 2^-8 norm-wise even if every element did.
// Hence 1e-3 for the fp32 weight gradients and 1e-3 + 2^-8 for the bf16 outputs.
#include <gtest/gtest.h>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "gpu_test_support.h"
#include "kernels/cpu/cpu_fp8_backend.h"
#include "kernels/cpu/half_convert.h"
#include "kernels/cuda/fp8/cuda_fp8_backend.h"
#include "kernels/cuda/fp8/fp8_linear.h"
#include "kernels/cuda/fp8/fp8_quantize.h"
#include "kernels/cuda/fp8/lt_fp8_gemm.h"
#include "kernels/fp8/fp8_format.h"
#include "kernels/fp8/fp8_layers.h"

namespace ustrain::gpu_test {
namespace {

using cuda::Fp8Grouping;
using cuda::Fp8OperandShape;
using fp8::Format;
using fp8::Recipe;
using fp8::Role;

constexpr double kFp32GemmBound = 1e-3;
constexpr double kBf16GemmBound = 1e-3 + 1.0 / 256.0;

void check(cudaError_t e, const char* what) { ASSERT_EQ(e, cudaSuccess) << what << ": " << cudaGetErrorString(e); }

// Device memory of n elements of T, freed on destruction.
template <class T>
class DeviceBuffer {
 public:
  explicit DeviceBuffer(std::size_t n) : n_(std::max<std::size_t>(n, 1)) {
    check(cudaMalloc(&p_, n_ * sizeof(T)), "cudaMalloc");
    check(cudaMemset(p_, 0, n_ * sizeof(T)), "cudaMemset");
  }
  explicit DeviceBuffer(const std::vector<T>& v) : DeviceBuffer(v.size()) { upload(v); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer() { cudaFree(p_); }
  T* get() const { return static_cast<T*>(p_); }
  void upload(const std::vector<T>& v) {
    check(cudaMemcpy(p_, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice), "upload");
  }
  std::vector<T> download(std::size_t n) const {
    std::vector<T> v(n);
    check(cudaDeviceSynchronize(), "kernels before a download");
    check(cudaMemcpy(v.data(), p_, n * sizeof(T), cudaMemcpyDeviceToHost), "download");
    return v;
  }

 private:
  void* p_ = nullptr;
  std::size_t n_;
};

cuda::Fp8Format device_format(Format f) { return f == Format::e4m3 ? cuda::Fp8Format::e4m3 : cuda::Fp8Format::e5m2; }

std::vector<std::uint16_t> to_bf16(const std::vector<float>& x) {
  std::vector<std::uint16_t> b(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) b[i] = cpu::float_to_bf16(x[i]);
  return b;
}

// Normal values, bf16-exact, with a few outliers a thousand times larger.
std::vector<float> with_outliers(std::int64_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_int_distribution<std::int64_t> at(0, n - 1);
  std::vector<float> x(static_cast<std::size_t>(n));
  for (float& v : x) v = normal(rng);
  for (int i = 0; i < 5; ++i) x[static_cast<std::size_t>(at(rng))] *= 1000.0f;
  for (float& v : x) v = cpu::bf16_to_float(cpu::float_to_bf16(v));
  return x;
}

struct Quantized {
  std::vector<std::uint8_t> codes;
  std::vector<float> scale, descale;
};

// fp8_quantize of a bf16 (rows, cols) matrix, copied back.
Quantized quantize_on_device(const std::vector<std::uint16_t>& src, std::int64_t rows, std::int64_t cols,
                             bool transpose, Fp8Grouping grouping, const cuda::Fp8QuantizeScaling& scaling) {
  const cuda::Fp8QuantizeSource source{nullptr, rows, cols, transpose, grouping};
  const Fp8OperandShape s = source.shape();
  DeviceBuffer<std::uint16_t> x(src);
  DeviceBuffer<std::uint8_t> codes(static_cast<std::size_t>(rows * cols));
  DeviceBuffer<float> amax(static_cast<std::size_t>(s.groups())), scale(static_cast<std::size_t>(s.groups()));
  DeviceBuffer<float> descale(static_cast<std::size_t>(s.lt_floats()));
  cuda::Fp8QuantizeSource with_data = source;
  with_data.data = x.get();
  cuda::fp8_quantize(with_data, scaling, {codes.get(), amax.get(), scale.get(), descale.get()}, nullptr);
  return {codes.download(static_cast<std::size_t>(rows * cols)), scale.download(static_cast<std::size_t>(s.groups())),
          descale.download(static_cast<std::size_t>(s.lt_floats()))};
}

class GpuFp8Test : public GpuTest {};

// Every bf16 value (NaN, infinities, subnormals, ties, values past the largest FP8 value)
// times a tensor scale encodes as fp8::encode does, transposed or not, and the recorded amax
// is the largest magnitude with NaN ignored.
TEST_F(GpuFp8Test, QuantisationEncodesEveryBf16AsTheHostDoes) {
  std::vector<std::uint16_t> all(65536);
  for (std::size_t i = 0; i < all.size(); ++i) all[i] = static_cast<std::uint16_t>(i);
  for (const Format f : {Format::e4m3, Format::e5m2}) {
    for (const float s : {1.0f, 3.0f, 0.0078125f, 1e4f}) {
      DeviceBuffer<float> scale(std::vector<float>{s}), recorded(std::vector<float>{0.5f});
      const cuda::Fp8QuantizeScaling scaling{device_format(f), 0, false, scale.get(), recorded.get()};
      for (const bool transpose : {false, true}) {
        const Quantized q = quantize_on_device(all, 256, 256, transpose, Fp8Grouping::tensor, scaling);
        int wrong = 0;
        for (std::int64_t r = 0; r < 256; ++r)
          for (std::int64_t c = 0; c < 256; ++c) {
            const float x = cpu::bf16_to_float(all[static_cast<std::size_t>(r * 256 + c)]);
            const std::uint8_t want = fp8::encode(f, x * s, true);
            const std::uint8_t got = q.codes[static_cast<std::size_t>(transpose ? c * 256 + r : r * 256 + c)];
            if (got != want && ++wrong <= 5)
              ADD_FAILURE() << fp8::format_name(f) << " scale " << s << (transpose ? " transposed" : "") << ": x = "
                            << x << " encodes as 0x" << std::hex << int(got) << ", the host says 0x" << int(want);
          }
        EXPECT_EQ(wrong, 0) << fp8::format_name(f) << " scale " << s;
        EXPECT_EQ(q.scale[0], s);
        EXPECT_EQ(q.descale[0], 1.0f / s);
      }
      EXPECT_EQ(recorded.download(1)[0], std::numeric_limits<float>::infinity());  // the bf16 infinities
    }
  }
  // Without infinities the amax is the largest finite magnitude, NaN ignored.
  std::vector<std::uint16_t> finite = to_bf16({1.0f, -3.5f, 2.0f, -0.25f});
  finite.push_back(0x7fc0);  // NaN
  finite.push_back(0xffc0);
  DeviceBuffer<float> scale(std::vector<float>{1.0f}), recorded(std::vector<float>{0.0f});
  quantize_on_device(finite, 1, 6, false, Fp8Grouping::tensor, {cuda::Fp8Format::e4m3, 0, false, scale.get(), recorded.get()});
  EXPECT_EQ(recorded.download(1)[0], 3.5f);
}

// current, rowwise and blockwise: every group's scale is fp8::scales_now's, for each role, with
// the reduction axis along the columns or (transposed operand) down the rows, and the codes are
// the host's encoding with those scales. The matrix has partial 128-blocks, an all-zero block
// and row (their scale stays 1) and outliers.
TEST_F(GpuFp8Test, ScalesAndCodesMatchTheHostRecipes) {
  const std::int64_t rows = 272, cols = 400;
  std::vector<float> x = with_outliers(rows * cols, 11);
  for (std::int64_t r = 0; r < 128; ++r)
    for (std::int64_t c = 0; c < 128; ++c) x[static_cast<std::size_t>(r * cols + c)] = 0.0f;
  for (std::int64_t c = 0; c < cols; ++c) x[static_cast<std::size_t>(200 * cols + c)] = 0.0f;
  const std::vector<std::uint16_t> xb = to_bf16(x);
  for (const Recipe recipe : {Recipe::current, Recipe::rowwise, Recipe::blockwise})
    for (const Role role : {Role::activation, Role::weight, Role::gradient})
      for (const bool k_in_cols : {true, false}) {
        const fp8::Config c{recipe, Format::e5m2, 8, 1};
        const fp8::Operand op{x.data(), rows, cols, k_in_cols, role};
        const fp8::ScaleGrid want = fp8::scales_now(c, op);
        const Format f = fp8::format_of(c, role);
        const Fp8Grouping grouping = cuda::fp8_grouping(recipe, role);
        const cuda::Fp8QuantizeScaling scaling{device_format(f), c.margin, recipe != Recipe::current, nullptr, nullptr};
        const Quantized q = quantize_on_device(xb, rows, cols, !k_in_cols, grouping, scaling);
        const Fp8OperandShape s{k_in_cols ? rows : cols, k_in_cols ? cols : rows, grouping};
        const std::string what = std::string(fp8::recipe_name(recipe)) + " role " + std::to_string(int(role)) +
                                 (k_in_cols ? ", K along columns" : ", K along rows");
        int wrong_scales = 0, wrong_codes = 0;
        for (std::int64_t r = 0; r < rows; ++r)
          for (std::int64_t col = 0; col < cols; ++col) {
            const std::int64_t o = k_in_cols ? r : col, k = k_in_cols ? col : r;
            const float got = q.scale[static_cast<std::size_t>(s.group_of(o, k))];
            const float expected = want.at(r, col);
            wrong_scales += got != expected;
            const std::uint8_t code = fp8::encode(f, x[static_cast<std::size_t>(r * cols + col)] * expected, true);
            wrong_codes += q.codes[static_cast<std::size_t>(o * s.k + k)] != code;
          }
        EXPECT_EQ(wrong_scales, 0) << what;
        EXPECT_EQ(wrong_codes, 0) << what;
        for (std::int64_t g = 0; g < s.groups(); ++g)
          ASSERT_EQ(q.descale[static_cast<std::size_t>(s.lt_index(g))], 1.0f / q.scale[static_cast<std::size_t>(g)])
              << what << " group " << g;
      }
}

// The three GEMMs of a linear layer on the GPU against CpuFp8Backend, for every recipe and both
// gradient formats; delayed scaling with non-power-of-two scales, some of them saturating, and
// the same amaxes recorded on both sides.
TEST_F(GpuFp8Test, LinearGemmsMatchTheCpuEmulation) {
  const std::int64_t n = 160, in = 384, outs = 272;  // partial 128-blocks along O
  const std::vector<float> x = with_outliers(n * in, 21), w = with_outliers(outs * in, 22);
  const std::vector<float> d = with_outliers(n * outs, 23);
  std::vector<std::uint16_t> xb = to_bf16(x), wb = to_bf16(w), db = to_bf16(d);
  DeviceBuffer<std::uint16_t> gx(xb), gw(wb), gd(db), gout(static_cast<std::size_t>(n * outs)),
      gdx(static_cast<std::size_t>(n * in));
  DeviceBuffer<float> gdw(static_cast<std::size_t>(outs * in));
  DeviceBuffer<unsigned char> workspace(cuda::LtFp8Gemm::kWorkspaceBytes);
  cuda::LtFp8Gemm lt;
  const std::vector<float> delayed_scales{37.0f, 150.0f, 900.0f};  // activation, weight, gradient

  for (const Recipe recipe : {Recipe::delayed, Recipe::current, Recipe::rowwise, Recipe::blockwise})
    for (const Format grad : {Format::e5m2, Format::e4m3}) {
      const fp8::Config c{recipe, grad, 4, 0};
      const std::string what = std::string(fp8::recipe_name(recipe)) + ", gradients " + fp8::format_name(grad);
      // CPU reference
      CpuFp8Backend cpu_fp8(1, c);
      std::vector<float> dw(static_cast<std::size_t>(outs * in), 0.0f);
      cpu_fp8.fp8_layers()->add(wb.data(), "w");
      cpu_fp8.fp8_layers()->add(dw.data(), "w.wgrad");
      fp8::LayerScaling& w_state = *cpu_fp8.fp8_layers()->find(wb.data());
      fp8::LayerScaling& dw_state = *cpu_fp8.fp8_layers()->find(dw.data());
      if (recipe == Recipe::delayed)
        for (fp8::LayerScaling* st : {&w_state, &dw_state})
          for (int r = 0; r < fp8::kRoles; ++r)
            st->values()[static_cast<std::size_t>(r * (c.history + 2))] = delayed_scales[static_cast<std::size_t>(r)];
      std::vector<std::uint16_t> out(static_cast<std::size_t>(n * outs)), dx(static_cast<std::size_t>(n * in));
      const Tensor tx(xb.data(), Shape{n, in}, DType::bf16), tw(wb.data(), Shape{outs, in}, DType::bf16);
      const Tensor td(db.data(), Shape{n, outs}, DType::bf16);
      cpu_fp8.linear_forward(Tensor(out.data(), Shape{n, outs}, DType::bf16), tx, tw);
      cpu_fp8.linear_backward_input(Tensor(dx.data(), Shape{n, in}, DType::bf16), td, tw);
      cpu_fp8.linear_backward_weight(Tensor(dw.data(), Shape{outs, in}), td, tx);

      // GPU
      DeviceBuffer<float> w_scales(delayed_scales), dw_scales(delayed_scales);
      DeviceBuffer<float> w_amax(3), dw_amax(3);
      const cuda::Fp8DeviceScaling w_dev{w_scales.get(), w_amax.get()}, dw_dev{dw_scales.get(), dw_amax.get()};
      DeviceBuffer<unsigned char> scratch(cuda::fp8_linear_scratch_bytes(recipe, n, in, outs));
      check(cudaMemset(gdw.get(), 0, static_cast<std::size_t>(outs * in) * sizeof(float)), "zero dW");
      cuda::Fp8Linear linear(c, lt);
      linear.forward(gout.get(), gx.get(), gw.get(), n, in, outs, w_dev, scratch.get(), workspace.get(), nullptr);
      linear.backward_input(gdx.get(), gd.get(), gw.get(), n, in, outs, w_dev, scratch.get(), workspace.get(), nullptr);
      linear.backward_weight(gdw.get(), gd.get(), gx.get(), n, in, outs, dw_dev, scratch.get(), workspace.get(),
                             nullptr);

      const auto widen = [](const std::vector<std::uint16_t>& b) {
        std::vector<float> f(b.size());
        for (std::size_t i = 0; i < b.size(); ++i) f[i] = cpu::bf16_to_float(b[i]);
        return f;
      };
      expect_close(widen(gout.download(out.size())), widen(out), {Measure::norm_rel, kBf16GemmBound},
                   "forward, " + what);
      expect_close(widen(gdx.download(dx.size())), widen(dx), {Measure::norm_rel, kBf16GemmBound},
                   "input gradient, " + what);
      expect_close(gdw.download(dw.size()), dw, {Measure::norm_rel, kFp32GemmBound}, "weight gradient, " + what);

      // The weight gradient accumulates (beta = 1): a second call doubles it on both sides.
      cpu_fp8.linear_backward_weight(Tensor(dw.data(), Shape{outs, in}), td, tx);
      linear.backward_weight(gdw.get(), gd.get(), gx.get(), n, in, outs, dw_dev, scratch.get(), workspace.get(),
                             nullptr);
      expect_close(gdw.download(dw.size()), dw, {Measure::norm_rel, kFp32GemmBound},
                   "weight gradient accumulated twice, " + what);

      if (recipe == Recipe::delayed) {  // the same amaxes recorded, per key and role
        const std::vector<float> got_w = w_amax.download(3), got_dw = dw_amax.download(3);
        for (int r = 0; r < fp8::kRoles; ++r) {
          EXPECT_EQ(got_w[static_cast<std::size_t>(r)], w_state.pending()[static_cast<std::size_t>(r)]) << "role " << r;
          EXPECT_EQ(got_dw[static_cast<std::size_t>(r)], dw_state.pending()[static_cast<std::size_t>(r)]) << "role " << r;
        }
      }
    }
}

// CudaFp8Backend with delayed scaling over three steps against CpuFp8Backend: the first
// step's GEMMs with the initial scales, the amaxes brought back from the GPU at the step's end
// equal to the CPU's, the next scales equal, and the next steps' GEMMs use them.
TEST_F(GpuFp8Test, DelayedScalingStepsMatchTheCpuBackend) {
  const std::int64_t n = 64, in = 128, outs = 96;
  const std::vector<float> x = with_outliers(n * in, 31), w = with_outliers(outs * in, 32);
  const std::vector<float> d = with_outliers(n * outs, 33);
  std::vector<std::uint16_t> xb = to_bf16(x), wb = to_bf16(w), db = to_bf16(d);
  const fp8::Config c{Recipe::delayed, Format::e5m2, 2, 0};
  CpuFp8Backend cpu_fp8(1, c);
  cuda::CudaFp8Backend gpu_fp8(0, c);
  DeviceBuffer<std::uint16_t> gx(xb), gw(wb), gd(db), gout(static_cast<std::size_t>(n * outs)),
      gdx(static_cast<std::size_t>(n * in));
  DeviceBuffer<float> gdw(static_cast<std::size_t>(outs * in));
  std::vector<float> dw(static_cast<std::size_t>(outs * in), 0.0f);
  std::vector<std::uint16_t> out(static_cast<std::size_t>(n * outs)), dx(static_cast<std::size_t>(n * in));
  cpu_fp8.fp8_layers()->add(wb.data(), "w");
  cpu_fp8.fp8_layers()->add(dw.data(), "w.wgrad");
  gpu_fp8.fp8_layers()->add(gw.get(), "w");
  gpu_fp8.fp8_layers()->add(gdw.get(), "w.wgrad");
  const auto on = [](void* p, Shape s, DType t) { return Tensor(p, s, t, Device::cuda); };
  const auto widen = [](const std::vector<std::uint16_t>& b) {
    std::vector<float> f(b.size());
    for (std::size_t i = 0; i < b.size(); ++i) f[i] = cpu::bf16_to_float(b[i]);
    return f;
  };
  for (int step = 0; step < 3; ++step) {
    const std::string what = "step " + std::to_string(step);
    for (Backend* be : {static_cast<Backend*>(&cpu_fp8), static_cast<Backend*>(&gpu_fp8)}) be->fp8_layers()->begin_step();
    const Tensor tx(xb.data(), Shape{n, in}, DType::bf16), tw(wb.data(), Shape{outs, in}, DType::bf16);
    const Tensor td(db.data(), Shape{n, outs}, DType::bf16);
    cpu_fp8.linear_forward(Tensor(out.data(), Shape{n, outs}, DType::bf16), tx, tw);
    cpu_fp8.linear_backward_input(Tensor(dx.data(), Shape{n, in}, DType::bf16), td, tw);
    cpu_fp8.linear_backward_weight(Tensor(dw.data(), Shape{outs, in}), td, tx);
    const Tensor gtx = on(gx.get(), Shape{n, in}, DType::bf16), gtw = on(gw.get(), Shape{outs, in}, DType::bf16);
    const Tensor gtd = on(gd.get(), Shape{n, outs}, DType::bf16);
    gpu_fp8.linear_forward(on(gout.get(), Shape{n, outs}, DType::bf16), gtx, gtw);
    gpu_fp8.linear_backward_input(on(gdx.get(), Shape{n, in}, DType::bf16), gtd, gtw);
    gpu_fp8.linear_backward_weight(on(gdw.get(), Shape{outs, in}, DType::f32), gtd, gtx);
    expect_close(widen(gout.download(out.size())), widen(out), {Measure::norm_rel, kBf16GemmBound}, "forward, " + what);
    expect_close(widen(gdx.download(dx.size())), widen(dx), {Measure::norm_rel, kBf16GemmBound},
                 "input gradient, " + what);
    expect_close(gdw.download(dw.size()), dw, {Measure::norm_rel, kFp32GemmBound}, "weight gradient, " + what);

    gpu_fp8.fp8_layers()->collect_amaxes();
    const auto cpu_states = cpu_fp8.fp8_layers()->by_name(), gpu_states = gpu_fp8.fp8_layers()->by_name();
    ASSERT_EQ(cpu_states.size(), 2u);
    ASSERT_EQ(gpu_states.size(), 2u);
    for (const auto& [name, cs] : cpu_states) {
      fp8::LayerScaling& gs = *gpu_states.at(name);
      for (int r = 0; r < fp8::kRoles; ++r)
        EXPECT_EQ(cs->pending()[static_cast<std::size_t>(r)], gs.pending()[static_cast<std::size_t>(r)])
            << what << ", " << name << ", role " << r;
    }
    cpu_fp8.fp8_layers()->end_step();
    gpu_fp8.fp8_layers()->end_step();
    for (const auto& [name, cs] : cpu_states) EXPECT_EQ(cs->values(), gpu_states.at(name)->values()) << what << ", " << name;
  }
}

}  // namespace
}  // namespace ustrain::gpu_test
