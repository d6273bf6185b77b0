#include "kernels/cuda/cuda_resources.h"

#include "kernels/cuda/cuda_check.h"
#include "kernels/tensor.h"

namespace ustrain::cuda {

void* device_malloc(std::size_t bytes, const char* what) {
  void* p = nullptr;
  const cudaError_t err = cudaMalloc(&p, bytes);
  if (err == cudaErrorMemoryAllocation) {
    cudaGetLastError();  // clear it: the process may go on to report and exit cleanly
    std::size_t free_bytes = 0, total_bytes = 0;
    cudaMemGetInfo(&free_bytes, &total_bytes);
    throw UserError("out of GPU memory allocating " + format_bytes(bytes) + " for " + what + " (" +
                    format_bytes(free_bytes) + " of " + format_bytes(total_bytes) +
                    " free); lower train.micro_batch or train.seq_len, set train.recompute = \"selective\" or "
                    "\"full\", or raise parallel.zero (`ustrain train --dry-run` prints the memory plan)");
  }
  USTRAIN_CUDA_CHECK(err);
  return p;
}

void* pinned_malloc(std::size_t bytes, const char* what) {
  void* p = nullptr;
  const cudaError_t err = cudaHostAlloc(&p, bytes, cudaHostAllocDefault);
  if (err == cudaErrorMemoryAllocation) {
    cudaGetLastError();  // clear it, as above
    throw UserError("out of page-locked host memory allocating " + format_bytes(bytes) + " for " + what +
                    "; free host memory or raise the job's memory limit");
  }
  USTRAIN_CUDA_CHECK(err);
  return p;
}

void free_pinned(void* p) {
  if (p != nullptr) cudaFreeHost(p);  // a deleter: nothing to do about a failure here
}

Stream::Stream() { USTRAIN_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking)); }

Stream::~Stream() {
  if (stream_ != nullptr) cudaStreamDestroy(stream_);
}

DeviceScratch::~DeviceScratch() {
  if (data_ != nullptr) cudaFree(data_);
}

void DeviceScratch::release() {
  if (data_ != nullptr) USTRAIN_CUDA_CHECK(cudaFree(data_));
  data_ = nullptr;
  capacity_ = 0;
}

void* DeviceScratch::get(std::size_t bytes, cudaStream_t stream) {
  if (bytes <= capacity_) return data_;
  if (data_ != nullptr) {
    USTRAIN_CUDA_CHECK(cudaStreamSynchronize(stream));
    USTRAIN_CUDA_CHECK(cudaFree(data_));
    data_ = nullptr;
    capacity_ = 0;
  }
  const std::size_t rounded = (bytes + 255) / 256 * 256;
  data_ = device_malloc(rounded, "op scratch");
  capacity_ = rounded;
  return data_;
}

}  // namespace ustrain::cuda
