// The tensor type: a non-owning, contiguous, row-major view into planned memory.
//
// Tensors never allocate. Memory comes from arenas laid out by the memory plan
// (core/memory/memory_plan.h); a Tensor is a pointer plus shape, dtype and device.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>

#include "kernels/error.h"

namespace ustrain {

// f64 is for host scalars reduced across ranks (loss sums, norms); no op computes in it.
enum class DType : std::uint8_t { f32, bf16, f16, i32, u16, u32, f64 };
enum class Device : std::uint8_t { cpu, cuda };

std::size_t dtype_size(DType t);
// "512 B", "12.3 KiB", "1.50 MiB": byte counts for people.
std::string format_bytes(std::size_t bytes);
const char* dtype_name(DType t);
const char* device_name(Device d);

// Up to four dimensions, row-major.
class Shape {
 public:
  static constexpr int kMaxRank = 4;
  Shape() = default;
  Shape(std::initializer_list<std::int64_t> dims);

  int rank() const { return rank_; }
  std::int64_t operator[](int i) const { return dims_[static_cast<std::size_t>(i)]; }
  std::int64_t numel() const;
  // Product of all dimensions but the last: the number of rows.
  std::int64_t rows() const { return rank_ == 0 ? 1 : numel() / dims_[static_cast<std::size_t>(rank_ - 1)]; }
  std::int64_t last() const { return rank_ == 0 ? 1 : dims_[static_cast<std::size_t>(rank_ - 1)]; }
  bool operator==(const Shape& o) const;
  std::string str() const;  // "(2, 3, 4)"

 private:
  std::array<std::int64_t, kMaxRank> dims_{};
  int rank_ = 0;
};

struct Tensor {
  void* data = nullptr;
  Shape shape;
  DType dtype = DType::f32;
  Device device = Device::cpu;

  Tensor() = default;
  Tensor(void* d, Shape s, DType t = DType::f32, Device dev = Device::cpu)
      : data(d), shape(s), dtype(t), device(dev) {}

  bool empty() const { return data == nullptr; }
  std::int64_t numel() const { return shape.numel(); }
  std::size_t bytes() const { return static_cast<std::size_t>(numel()) * dtype_size(dtype); }

  float* f32() const { check(DType::f32); return static_cast<float*>(data); }
  std::int32_t* i32() const { check(DType::i32); return static_cast<std::int32_t*>(data); }

  // Same memory, another shape with the same element count.
  Tensor view(Shape s) const;
  // Rows [begin, end) along the first dimension.
  Tensor slice(std::int64_t begin, std::int64_t end) const;

 private:
  void check(DType t) const {
    USTRAIN_ASSERT(dtype == t, std::string("tensor holds ") + dtype_name(dtype) + ", accessed as " + dtype_name(t));
  }
};

}  // namespace ustrain
