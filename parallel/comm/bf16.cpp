#include "parallel/comm/bf16.h"

namespace ustrain::bf16 {

void sum_into(const std::uint16_t* in, std::uint16_t* inout, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) inout[i] = from_float(to_float(in[i]) + to_float(inout[i]));
}

void divide(std::uint16_t* data, std::int64_t n, float divisor) {
  for (std::int64_t i = 0; i < n; ++i) data[i] = from_float(to_float(data[i]) / divisor);
}

}  // namespace ustrain::bf16

namespace ustrain::f16 {

void sum_into(const _Float16* in, _Float16* inout, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) inout[i] = static_cast<_Float16>(static_cast<float>(in[i]) + static_cast<float>(inout[i]));
}

void divide(_Float16* data, std::int64_t n, float divisor) {
  for (std::int64_t i = 0; i < n; ++i) data[i] = static_cast<_Float16>(static_cast<float>(data[i]) / divisor);
}

}  // namespace ustrain::f16
