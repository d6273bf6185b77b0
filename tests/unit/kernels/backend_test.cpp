// CpuBackend basics: make_backend, memory, copy/fill/convert, add, scale, sum_of_squares.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>

#include "kernels/backend.h"
#include "tests/unit/kernels/reference.h"
#ifdef USTRAIN_HAVE_CUDA
#include "kernels/cuda/cuda_device.h"
#endif

namespace ustrain {
namespace {

using test::random_floats;

TEST(MakeBackend, CpuGivesTheCpuBackendWithTheThreadCount) {
  auto backend = make_backend(Device::cpu, 1);
  EXPECT_EQ(backend->device(), Device::cpu);
  auto* cpu = dynamic_cast<CpuBackend*>(backend.get());
  ASSERT_NE(cpu, nullptr);
  EXPECT_EQ(cpu->threads(), 1);
  EXPECT_GE(CpuBackend(0).threads(), 1);
}

TEST(MakeBackend, CudaWithoutAGpuIsAUserErrorThatNamesTheFix) {
#ifdef USTRAIN_HAVE_CUDA
  if (cuda::device_count() > 0) GTEST_SKIP() << "a GPU is visible: the cuda backend starts (tests/gpu covers it)";
#endif
  try {
    make_backend(Device::cuda, 0);
    FAIL() << "expected UserError";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("device.type = \"cpu\""), std::string::npos) << e.what();
  }
}

TEST(MakeBackend, NegativeThreadsIsAUserError) { EXPECT_THROW(make_backend(Device::cpu, -1), UserError); }

TEST(CpuMemory, AllocationsAreAlignedAndWritable) {
  CpuBackend cpu(1);
  for (std::size_t bytes : {std::size_t{1}, std::size_t{13}, std::size_t{4096}, std::size_t{100003}}) {
    void* p = cpu.allocate(bytes);
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(p) % 64, 0u);
    std::memset(p, 0xAB, bytes);
    EXPECT_EQ(static_cast<unsigned char*>(p)[bytes - 1], 0xAB);
    cpu.release(p);
  }
}

TEST(CpuCopy, CopiesEveryDtypeByBytes) {
  CpuBackend cpu(1);
  std::vector<float> src = random_floats(37, 1), dst(37, 0.0f);
  cpu.copy(Tensor(dst.data(), {37}), Tensor(src.data(), {37}));
  EXPECT_TRUE(test::same_bits(dst, src));

  std::vector<std::uint16_t> h_src = {1, 2, 65535, 7, 9}, h_dst(5, 0);
  cpu.copy(Tensor(h_dst.data(), {5}, DType::bf16), Tensor(h_src.data(), {5}, DType::bf16));
  EXPECT_EQ(h_dst, h_src);
}

TEST(CpuCopy, RejectsMismatchedDtypeOrSize) {
  CpuBackend cpu(1);
  std::vector<float> a(6), b(5);
  std::vector<std::int32_t> c(6);
  EXPECT_THROW(cpu.copy(Tensor(a.data(), {6}), Tensor(b.data(), {5})), std::logic_error);
  EXPECT_THROW(cpu.copy(Tensor(a.data(), {6}), Tensor(c.data(), {6}, DType::i32)), std::logic_error);
}

TEST(CpuFill, FillsEachDtypeWithTheValue) {
  CpuBackend cpu(1);
  std::vector<float> f(7, 1.0f);
  cpu.fill(Tensor(f.data(), {7}), -2.5f);
  for (float x : f) EXPECT_EQ(x, -2.5f);

  std::vector<std::int32_t> i(5, 0);
  cpu.fill(Tensor(i.data(), {5}, DType::i32), -3.0f);
  for (auto x : i) EXPECT_EQ(x, -3);

  std::vector<std::uint16_t> h(3, 0);
  cpu.fill(Tensor(h.data(), {3}, DType::bf16), 1.0f);
  for (auto x : h) EXPECT_EQ(x, 0x3F80);  // bfloat16 1.0
  cpu.fill(Tensor(h.data(), {3}, DType::f16), -2.0f);
  for (auto x : h) EXPECT_EQ(x, 0xC000);  // binary16 -2.0

  EXPECT_THROW(cpu.fill(Tensor(i.data(), {5}, DType::i32), 2.5f), std::logic_error);
}

TEST(CpuConvert, RoundsToNearestEvenAndRoundTrips) {
  CpuBackend cpu(1);
  // 1 + 2^-8 is halfway between two bf16 values: ties go to the even one (1.0); 1 + 3 * 2^-8
  // rounds up to 1 + 2^-6.
  std::vector<float> f = {1.0f, 1.0f + 0x1p-8f, 1.0f + 3 * 0x1p-8f, -2.5f};
  std::vector<std::uint16_t> h(4);
  cpu.convert(Tensor(h.data(), {4}, DType::bf16), Tensor(f.data(), {4}));
  EXPECT_EQ(h[0], 0x3F80);
  EXPECT_EQ(h[1], 0x3F80);
  EXPECT_EQ(h[2], 0x3F82);
  EXPECT_EQ(h[3], 0xC020);
  std::vector<float> back(4);
  cpu.convert(Tensor(back.data(), {4}), Tensor(h.data(), {4}, DType::bf16));
  EXPECT_EQ(back[0], 1.0f);
  EXPECT_EQ(back[2], 1.0f + 0x1p-6f);
  EXPECT_EQ(back[3], -2.5f);
  cpu.convert(Tensor(h.data(), {4}, DType::f16), Tensor(f.data(), {4}));
  EXPECT_EQ(h[3], 0xC100);  // binary16 -2.5
  std::vector<std::int32_t> ids(4);
  EXPECT_THROW(cpu.convert(Tensor(ids.data(), {4}, DType::i32), Tensor(f.data(), {4})), std::logic_error);
}

TEST(CpuAdd, MatchesElementwiseSumAlsoInPlace) {
  CpuBackend cpu(2);
  for (std::int64_t n : {1, 7, 40000}) {
    auto a = random_floats(static_cast<std::size_t>(n), 2), b = random_floats(static_cast<std::size_t>(n), 3);
    std::vector<float> out(a.size());
    cpu.add(Tensor(out.data(), {n}), Tensor(a.data(), {n}), Tensor(b.data(), {n}));
    for (std::size_t k = 0; k < a.size(); ++k) ASSERT_EQ(out[k], a[k] + b[k]);  // one rounding, IEEE
    cpu.add(Tensor(a.data(), {n}), Tensor(a.data(), {n}), Tensor(b.data(), {n}));
    EXPECT_TRUE(test::same_bits(a, out));
  }
}

TEST(CpuScale, MultipliesEveryElement) {
  CpuBackend cpu(2);
  for (std::int64_t n : {1, 13, 50001}) {
    auto x = random_floats(static_cast<std::size_t>(n), 4);
    const auto before = test::to_double(x);
    cpu.scale(Tensor(x.data(), {n}), 0.3f);
    for (std::size_t k = 0; k < x.size(); ++k)
      ASSERT_NEAR(x[k], before[k] * 0.3, 1e-7 * std::abs(before[k] * 0.3) + 1e-30);
  }
}

TEST(CpuSumOfSquares, MatchesFloat64Sum) {
  CpuBackend cpu(2);
  for (std::int64_t n : {1, 7, 100003}) {
    auto x = random_floats(static_cast<std::size_t>(n), 5, -3.0f, 3.0f);
    double want = 0.0;
    for (float v : x) want += static_cast<double>(v) * v;
    // float squares are exact in double; only the summation rounds.
    EXPECT_NEAR(cpu.sum_of_squares(Tensor(x.data(), {n})), want, 1e-12 * want) << "n=" << n;
  }
}

TEST(CpuSumOfSquares, SameBitsForEveryThreadCount) {
  auto x = random_floats(300007, 6, -2.0f, 2.0f);
  const Tensor t(x.data(), {300007});
  const double one = CpuBackend(1).sum_of_squares(t);
  EXPECT_EQ(CpuBackend(2).sum_of_squares(t), one);
  EXPECT_EQ(CpuBackend(3).sum_of_squares(t), one);
  CpuBackend cpu(2);
  EXPECT_EQ(cpu.sum_of_squares(t), cpu.sum_of_squares(t));
}

}  // namespace
}  // namespace ustrain
