// Owned CUDA resources: a stream and a grow-only device buffer. Plain C++ (no device code).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

namespace ustrain::cuda {

// cudaMalloc; running out of device memory is a UserError naming `what` and how to fit.
void* device_malloc(std::size_t bytes, const char* what);

// cudaHostAlloc (page-locked host memory), freed by free_pinned; running out is a UserError
// naming `what`.
void* pinned_malloc(std::size_t bytes, const char* what);
void free_pinned(void* p);

// A non-blocking stream: it does not synchronise with the legacy default stream.
class Stream {
 public:
  Stream();
  ~Stream();
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  cudaStream_t get() const { return stream_; }

 private:
  cudaStream_t stream_ = nullptr;
};

// Device scratch that only grows, for ops that need temporary memory when no memory plan has
// given the backend its op scratch (tests, tools without a plan): sized at a shape's first
// call, so later calls of the shape never allocate.
class DeviceScratch {
 public:
  DeviceScratch() = default;
  ~DeviceScratch();
  DeviceScratch(const DeviceScratch&) = delete;
  DeviceScratch& operator=(const DeviceScratch&) = delete;
  // At least `bytes` of device memory; the previous contents are not kept. `stream` is
  // synchronised before an old buffer is freed, so work still using it completes first.
  void* get(std::size_t bytes, cudaStream_t stream);
  std::size_t capacity() const { return capacity_; }
  // Frees the buffer; the caller makes sure no queued work still uses it.
  void release();

 private:
  void* data_ = nullptr;
  std::size_t capacity_ = 0;
};

}  // namespace ustrain::cuda
