#include "kernels/byte_text.h"

#include <fmt/format.h>

#include <cmath>

#include "kernels/tensor.h"

namespace ustrain {

std::string format_gigabytes(double bytes, int decimals) {
  constexpr double kSmallest = 0.01e9;  // below it, GB would show only zeros
  if (std::isfinite(bytes) && bytes >= 0 && bytes < kSmallest)
    return format_bytes(static_cast<std::size_t>(std::llround(bytes)));
  return fmt::format("{:.{}f} GB", bytes / 1e9, decimals);
}

}  // namespace ustrain
