#include "kernels/tensor.h"

#include <cstdio>

namespace ustrain {

std::size_t dtype_size(DType t) {
  switch (t) {
    case DType::f32: case DType::i32: case DType::u32: return 4;
    case DType::bf16: case DType::f16: case DType::u16: return 2;
    case DType::f64: return 8;
  }
  return 0;
}

const char* dtype_name(DType t) {
  switch (t) {
    case DType::f32: return "f32";
    case DType::bf16: return "bf16";
    case DType::f16: return "f16";
    case DType::i32: return "i32";
    case DType::u16: return "u16";
    case DType::u32: return "u32";
    case DType::f64: return "f64";
  }
  return "?";
}

const char* device_name(Device d) { return d == Device::cpu ? "cpu" : "cuda"; }

Shape::Shape(std::initializer_list<std::int64_t> dims) {
  USTRAIN_ASSERT(dims.size() <= static_cast<std::size_t>(kMaxRank), "too many dimensions");
  for (std::int64_t d : dims) {
    USTRAIN_ASSERT(d >= 0, "negative dimension");
    dims_[static_cast<std::size_t>(rank_++)] = d;
  }
}

std::int64_t Shape::numel() const {
  std::int64_t n = 1;
  for (int i = 0; i < rank_; ++i) n *= dims_[static_cast<std::size_t>(i)];
  return n;
}

bool Shape::operator==(const Shape& o) const {
  if (rank_ != o.rank_) return false;
  for (int i = 0; i < rank_; ++i)
    if (dims_[static_cast<std::size_t>(i)] != o.dims_[static_cast<std::size_t>(i)]) return false;
  return true;
}

std::string Shape::str() const {
  std::string s = "(";
  for (int i = 0; i < rank_; ++i) {
    if (i) s += ", ";
    s += std::to_string(dims_[static_cast<std::size_t>(i)]);
  }
  return s + ")";
}

Tensor Tensor::view(Shape s) const {
  USTRAIN_ASSERT(s.numel() == numel(), "view " + s.str() + " of " + shape.str());
  return Tensor(data, s, dtype, device);
}

Tensor Tensor::slice(std::int64_t begin, std::int64_t end) const {
  USTRAIN_ASSERT(shape.rank() >= 1 && 0 <= begin && begin <= end && end <= shape[0], "slice out of range");
  const std::int64_t row = numel() / (shape[0] == 0 ? 1 : shape[0]);
  Shape s;
  switch (shape.rank()) {
    case 1: s = Shape{end - begin}; break;
    case 2: s = Shape{end - begin, shape[1]}; break;
    case 3: s = Shape{end - begin, shape[1], shape[2]}; break;
    default: s = Shape{end - begin, shape[1], shape[2], shape[3]}; break;
  }
  auto* base = static_cast<char*>(data) + static_cast<std::size_t>(begin * row) * dtype_size(dtype);
  return Tensor(base, s, dtype, device);
}

std::string format_bytes(std::size_t bytes) {
  const double b = static_cast<double>(bytes);
  char text[32];
  if (b >= 1024.0 * 1024 * 1024) std::snprintf(text, sizeof text, "%.2f GiB", b / (1024.0 * 1024 * 1024));
  else if (b >= 1024.0 * 1024) std::snprintf(text, sizeof text, "%.2f MiB", b / (1024.0 * 1024));
  else if (b >= 1024.0) std::snprintf(text, sizeof text, "%.1f KiB", b / 1024.0);
  else std::snprintf(text, sizeof text, "%zu B", bytes);
  return text;
}

}  // namespace ustrain
