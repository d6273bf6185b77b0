// Helpers for the GPU op tests: the CUDA backend under test beside the CPU reference, device
// buffers in any dtype, host-side rounding to bf16/f16, and the error measures with their
// tolerances.
//
// How CUDA results are compared with the CPU reference (which computes in fp32):
// - Inputs are rounded to the activation dtype `act` first and the CPU gets the same rounded
//   values, so the comparison measures only the op, never the input rounding.
// - act = f32: the CUDA op must agree to 1e-5 relative. Elementwise ops use the largest
//   per-element error (max_rel_error); ops that sum over a long dimension (GEMMs, attention,
//   scatter-adds) use the norm-wise error (norm_rel_error), because a single output that sums
//   to nearly zero has a large relative error under any change of summation order.
// - act = bf16 or f16: outputs in act carry that dtype's rounding (and so may the op's
//   intermediates), so the norm-wise error must stay below 2e-2 for bf16 (about five units
//   of bf16 rounding, 2^-8) and 2.5e-3 for f16 (the same five units of f16 rounding, 2^-11).
// - fp32 outputs that involve no act-rounded intermediate (parameter gradients of a GEMM or a
//   scatter-add, rstd, lse, losses) are held to the fp32 bound whatever act is: they see the
//   same inputs as the reference and differ only in summation order.
#pragma once

#ifndef USTRAIN_HAVE_CUDA
#error "the GPU tests build only where the CUDA toolkit is (USTRAIN_HAVE_CUDA): see tests/gpu/CMakeLists.txt"
#endif

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "kernels/backend.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/cuda/cuda_device.h"
#include "parallel/comm/bf16.h"

namespace ustrain::gpu_test {

// ---- error measures and tolerances ----

enum class Measure { max_rel, norm_rel };

struct Tolerance {
  Measure measure;
  double bound;
};

constexpr double kF32Bound = 1e-5;
constexpr double kBf16Bound = 2e-2;
constexpr double kF16Bound = 2.5e-3;

// The bound for outputs in `act` (see the header comment).
inline Tolerance act_tolerance(DType act, Measure f32_measure) {
  switch (act) {
    case DType::bf16:
      return {Measure::norm_rel, kBf16Bound};
    case DType::f16:
      return {Measure::norm_rel, kF16Bound};
    default:
      return {f32_measure, kF32Bound};
  }
}

// The bound for fp32 outputs computed from the same inputs as the reference.
inline Tolerance fp32_tolerance(Measure measure) { return {measure, kF32Bound}; }

inline double rms(const std::vector<float>& v) {
  double s = 0.0;
  for (float x : v) s += static_cast<double>(x) * x;
  return v.empty() ? 0.0 : std::sqrt(s / static_cast<double>(v.size()));
}

// max_i |got_i - want_i| / max(|want_i|, rms(want)): the relative error of every element at
// least as large as a typical one; smaller ones (often the result of cancellation, whose
// absolute error scales with the operands, not the result) are measured against the typical
// magnitude instead.
inline double max_rel_error(const std::vector<float>& got, const std::vector<float>& want) {
  EXPECT_EQ(got.size(), want.size());
  const double floor = std::max(rms(want), 1e-30);
  double worst = 0.0;
  for (std::size_t i = 0; i < got.size() && i < want.size(); ++i) {
    const double d = std::abs(static_cast<double>(got[i]) - want[i]);
    const double e = d / std::max(std::abs(static_cast<double>(want[i])), floor);
    worst = std::isnan(e) ? INFINITY : std::max(worst, e);
  }
  return worst;
}

// ||got - want|| / ||want|| (2-norms).
inline double norm_rel_error(const std::vector<float>& got, const std::vector<float>& want) {
  EXPECT_EQ(got.size(), want.size());
  double diff = 0.0, norm = 0.0;
  for (std::size_t i = 0; i < got.size() && i < want.size(); ++i) {
    const double d = static_cast<double>(got[i]) - want[i];
    diff += d * d;
    norm += static_cast<double>(want[i]) * want[i];
  }
  const double e = std::sqrt(diff) / std::max(std::sqrt(norm), 1e-30);
  return std::isnan(e) ? INFINITY : e;
}

inline void expect_close(const std::vector<float>& got, const std::vector<float>& want, Tolerance tol,
                         const std::string& what) {
  const bool norm = tol.measure == Measure::norm_rel;
  const double e = norm ? norm_rel_error(got, want) : max_rel_error(got, want);
  EXPECT_LE(e, tol.bound) << what << ": " << (norm ? "norm-wise" : "max") << " relative error " << e << " over "
                          << got.size() << " values (bound " << tol.bound << ")";
}

inline bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// ---- host values in the activation dtypes ----

// The nearest value of dtype t (round to nearest even), as a float.
inline float round_to(DType t, float x) {
  switch (t) {
    case DType::bf16:
      return bf16::to_float(bf16::from_float(x));
    case DType::f16:
      return static_cast<float>(static_cast<_Float16>(x));
    default:
      return x;
  }
}

inline std::vector<float> rounded(std::vector<float> v, DType t) {
  for (float& x : v) x = round_to(t, x);
  return v;
}

// Uniform in [lo, hi), rounded to dtype t.
inline std::vector<float> random_values(std::size_t n, std::uint32_t seed, DType t, float lo = -1.0f,
                                        float hi = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = round_to(t, dist(rng));
  return v;
}

inline std::vector<std::int32_t> random_ids(std::size_t n, std::int32_t vocab, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<std::int32_t> dist(0, vocab - 1);
  std::vector<std::int32_t> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

// Raw little-endian bytes of `values` in dtype t (f32, bf16 or f16).
inline std::vector<unsigned char> encode(const std::vector<float>& values, DType t) {
  std::vector<unsigned char> bytes(values.size() * dtype_size(t));
  for (std::size_t i = 0; i < values.size(); ++i) {
    unsigned char* at = bytes.data() + i * dtype_size(t);
    if (t == DType::f32) {
      std::memcpy(at, &values[i], 4);
    } else if (t == DType::bf16) {
      const std::uint16_t b = bf16::from_float(values[i]);
      std::memcpy(at, &b, 2);
    } else {
      USTRAIN_ASSERT(t == DType::f16, std::string("encode: no float encoding for ") + dtype_name(t));
      const auto h = static_cast<_Float16>(values[i]);
      std::memcpy(at, &h, 2);
    }
  }
  return bytes;
}

inline std::vector<float> decode(const std::vector<unsigned char>& bytes, DType t) {
  std::vector<float> values(bytes.size() / dtype_size(t));
  for (std::size_t i = 0; i < values.size(); ++i) {
    const unsigned char* at = bytes.data() + i * dtype_size(t);
    if (t == DType::f32) {
      std::memcpy(&values[i], at, 4);
    } else if (t == DType::bf16) {
      std::uint16_t b = 0;
      std::memcpy(&b, at, 2);
      values[i] = bf16::to_float(b);
    } else {
      USTRAIN_ASSERT(t == DType::f16, std::string("decode: no float decoding for ") + dtype_name(t));
      _Float16 h;
      std::memcpy(&h, at, 2);
      values[i] = static_cast<float>(h);
    }
  }
  return values;
}

// ---- device memory ----

// A tensor in memory from `backend` (test-only allocations), released on destruction.
class DeviceTensor {
 public:
  DeviceTensor(Backend& backend, Shape shape, DType dtype) : backend_(&backend) {
    const std::size_t bytes = static_cast<std::size_t>(shape.numel()) * dtype_size(dtype);
    tensor_ = Tensor(backend.allocate(bytes), shape, dtype, backend.device());
  }
  DeviceTensor(const DeviceTensor&) = delete;
  DeviceTensor& operator=(const DeviceTensor&) = delete;
  ~DeviceTensor() { backend_->release(tensor_.data); }

  const Tensor& tensor() const { return tensor_; }
  operator Tensor() const { return tensor_; }  // so that tests pass it straight to backend calls

  // Values must already be representable in the dtype (see rounded()).
  void upload(const std::vector<float>& values) {
    EXPECT_EQ(static_cast<std::int64_t>(values.size()), tensor_.numel());
    std::vector<unsigned char> bytes = encode(values, tensor_.dtype);
    backend_->copy(tensor_, Tensor(bytes.data(), tensor_.shape, tensor_.dtype));
  }
  void upload_ids(std::vector<std::int32_t> ids) {
    EXPECT_EQ(static_cast<std::int64_t>(ids.size()), tensor_.numel());
    backend_->copy(tensor_, Tensor(ids.data(), tensor_.shape, DType::i32));
  }
  std::vector<float> download() const {
    std::vector<unsigned char> bytes(tensor_.bytes());
    backend_->copy(Tensor(bytes.data(), tensor_.shape, tensor_.dtype), tensor_);
    return decode(bytes, tensor_.dtype);
  }

 private:
  Backend* backend_;
  Tensor tensor_;
};

// A device tensor holding `values` in dtype t.
inline std::unique_ptr<DeviceTensor> on_device(Backend& backend, const std::vector<float>& values, Shape shape,
                                               DType t) {
  auto d = std::make_unique<DeviceTensor>(backend, shape, t);
  d->upload(values);
  return d;
}

inline std::unique_ptr<DeviceTensor> ids_on_device(Backend& backend, const std::vector<std::int32_t>& ids) {
  auto d = std::make_unique<DeviceTensor>(backend, Shape{static_cast<std::int64_t>(ids.size())}, DType::i32);
  d->upload_ids(ids);
  return d;
}

// A host fp32 tensor over `v` for the CPU reference.
inline Tensor host(std::vector<float>& v, Shape s) {
  EXPECT_EQ(static_cast<std::int64_t>(v.size()), s.numel());
  return Tensor(v.data(), s, DType::f32);
}

inline Tensor host_ids(std::vector<std::int32_t>& v, Shape s) {
  EXPECT_EQ(static_cast<std::int64_t>(v.size()), s.numel());
  return Tensor(v.data(), s, DType::i32);
}

// ---- fixtures ----

inline bool gpu_required() {
  const char* v = std::getenv("USTRAIN_REQUIRE_GPU");
  return v != nullptr && std::string(v) == "1";
}

// The CUDA backend under test and the CPU reference. Every test skips, visibly, where no GPU is
// visible; one backend serves all tests of a process (creating cuBLASLt and cuDNN handles
// takes a while).
class GpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (cuda::device_count() == 0) {
      // Under USTRAIN_REQUIRE_GPU=1 (scripts/gpu-check.sh sets it) a skip would be a false pass.
      if (gpu_required())
        FAIL() << "USTRAIN_REQUIRE_GPU is set but no CUDA GPU is usable: " << cuda::device_count_error();
      GTEST_SKIP() << "no CUDA GPU visible (" << cuda::device_count_error()
                   << "); run the gpu tests on a machine with one";
    }
    if (!gpu_) {
      gpu_ = make_backend(Device::cuda);
      std::printf("[ gpu      ] %s\n", gpu_->name().c_str());
    }
  }
  static void TearDownTestSuite() { gpu_.reset(); }

  Backend& gpu() { return *gpu_; }
  CpuBackend& cpu() { return cpu_; }

 private:
  static inline std::unique_ptr<Backend> gpu_;
  CpuBackend cpu_{0};
};

// The same, for tests run once per activation dtype.
class GpuActTest : public GpuTest, public ::testing::WithParamInterface<DType> {
 protected:
  DType act() const { return GetParam(); }
};

inline std::string act_param_name(const ::testing::TestParamInfo<DType>& info) { return dtype_name(info.param); }

}  // namespace ustrain::gpu_test

namespace ustrain {
// How GoogleTest prints a dtype parameter (found by argument-dependent lookup).
inline void PrintTo(DType t, std::ostream* os) { *os << dtype_name(t); }
}  // namespace ustrain
