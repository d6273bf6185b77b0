// Sizes and rates in decimal gigabytes, where logs and reports give them in GB.
#pragma once

#include <string>

namespace ustrain {

// "1.23 GB" (`decimals` places), and below 0.01 GB, where that would read "0.00 GB", the
// binary units of format_bytes (kernels/tensor.h): "5.00 MiB", "12.0 KiB", "512 B". A rate is
// this with "/s" after it.
std::string format_gigabytes(double bytes, int decimals = 2);

}  // namespace ustrain
