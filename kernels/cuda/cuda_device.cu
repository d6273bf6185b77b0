// Thin by design: no spdlog, fmt or toml++ here (they do not compile under nvcc).
#include <cuda_runtime.h>

#include <cstdio>

#include "kernels/cuda/cuda_device.h"

namespace ustrain::cuda {

int device_count() {
  int n = 0;
  // Without a driver this returns cudaErrorInsufficientDriver (35): that means "no GPU".
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky error state
    return 0;
  }
  return n;
}

std::string device_count_error() {
  int n = 0;
  const cudaError_t err = cudaGetDeviceCount(&n);
  if (err == cudaSuccess) return n > 0 ? "" : "the CUDA runtime reports 0 devices";
  cudaGetLastError();
  return std::string(cudaGetErrorName(err)) + ": " + cudaGetErrorString(err);
}

std::string device_description(int index) {
  cudaDeviceProp prop{};
  const cudaError_t err = cudaGetDeviceProperties(&prop, index);
  if (err != cudaSuccess) return std::string("unavailable: ") + cudaGetErrorString(err);
  char buf[320];
  std::snprintf(buf, sizeof buf, "%s (sm_%d%d, %.1f GiB)", prop.name, prop.major, prop.minor,
                static_cast<double>(prop.totalGlobalMem) / (1024.0 * 1024.0 * 1024.0));
  return buf;
}

std::string device_uuid(int index) {
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, index) != cudaSuccess) {
    cudaGetLastError();
    return "";
  }
  static const char* hex = "0123456789abcdef";
  std::string out;
  for (unsigned char c : prop.uuid.bytes) {
    out += hex[c >> 4];
    out += hex[c & 15];
  }
  return out;
}

std::string runtime_version() {
  const int v = CUDART_VERSION;
  return std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10);
}

}  // namespace ustrain::cuda
