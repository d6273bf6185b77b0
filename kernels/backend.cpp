// make_backend: the op backend for a device.
#include "kernels/backend.h"

#include <cstdlib>
#include <string>

#include "kernels/cpu/cpu_mixed_backend.h"
#include "kernels/error.h"
#include "kernels/group_offsets.h"

#ifdef USTRAIN_HAVE_CUDA
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_device.h"
#endif

namespace ustrain {

void check_seq_range(const SeqRange& r, std::int64_t seq, const char* what) {
  USTRAIN_ASSERT(r.begin >= 0 && r.count >= 0 && r.begin + r.count <= seq,
                 std::string(what) + " rows [" + std::to_string(r.begin) + ", " + std::to_string(r.begin + r.count) +
                     ") outside a sequence of " + std::to_string(seq));
}

void Backend::linear_backward(Tensor dx, Tensor dweight, Tensor dout, Tensor x, Tensor weight) {
  if (!dx.empty()) linear_backward_input(dx, dout, weight);
  linear_backward_weight(dweight, dout, x);
}

void check_group_offsets(const char* op, std::span<const std::int64_t> offsets, std::size_t groups,
                         std::int64_t rows) {
  USTRAIN_ASSERT(offsets.size() == groups + 1, std::string(op) + ": " + std::to_string(offsets.size()) +
                                                   " group offsets for " + std::to_string(groups) +
                                                   " groups (want one more)");
  USTRAIN_ASSERT(offsets.front() == 0 && offsets.back() == rows,
                 std::string(op) + ": group offsets from " + std::to_string(offsets.front()) + " to " +
                     std::to_string(offsets.back()) + " for " + std::to_string(rows) + " rows");
  for (std::size_t g = 0; g < groups; ++g)
    USTRAIN_ASSERT(offsets[g] <= offsets[g + 1], std::string(op) + ": group offsets descend at group " +
                                                     std::to_string(g));
}

void Backend::grouped_linear_forward(Tensor out, Tensor x, std::span<const Tensor> weights,
                                     std::span<const std::int64_t> offsets) {
  for_each_nonempty_group("grouped_linear_forward", offsets, weights.size(), x.shape.rows(),
                          [&](std::size_t g, std::int64_t b, std::int64_t e) {
                            linear_forward(out.slice(b, e), x.slice(b, e), weights[g]);
                          });
}

void Backend::grouped_linear_backward_input(Tensor dx, Tensor dout, std::span<const Tensor> weights,
                                            std::span<const std::int64_t> offsets) {
  for_each_nonempty_group("grouped_linear_backward_input", offsets, weights.size(), dout.shape.rows(),
                          [&](std::size_t g, std::int64_t b, std::int64_t e) {
                            linear_backward_input(dx.slice(b, e), dout.slice(b, e), weights[g]);
                          });
}

void Backend::grouped_linear_backward_weight(std::span<const Tensor> dweights, Tensor dout, Tensor x,
                                             std::span<const std::int64_t> offsets) {
  for_each_nonempty_group("grouped_linear_backward_weight", offsets, dweights.size(), x.shape.rows(),
                          [&](std::size_t g, std::int64_t b, std::int64_t e) {
                            linear_backward_weight(dweights[g], dout.slice(b, e), x.slice(b, e));
                          });
}

void Backend::adamw_multi(std::span<const AdamWTensors> ranges, const AdamWParams& p) {
  for (const AdamWTensors& r : ranges) {
    AdamWParams q = p;
    q.weight_decay = r.weight_decay;
    adamw(r.param, r.grad, r.m, r.v, q);
    if (!r.compute_copy.empty()) convert(r.compute_copy, r.param);
  }
}

namespace {
void free_host(void* p) { std::free(p); }
}  // namespace

HostStaging Backend::allocate_host_staging(std::size_t bytes, const char* what) {
  if (bytes == 0) return HostStaging(nullptr, &free_host);
  void* p = std::malloc(bytes);
  if (p == nullptr) throw UserError("out of host memory allocating " + format_bytes(bytes) + " for " + what);
  return HostStaging(p, &free_host);
}

double Backend::sum_of_squares_multi(std::span<const Tensor> xs) {
  double total = 0;
  for (const Tensor& x : xs) total += sum_of_squares(x);
  return total;
}

int visible_gpus() {
#ifdef USTRAIN_HAVE_CUDA
  return cuda::device_count();
#else
  return 0;
#endif
}

std::string gpu_uuid(int index) {
#ifdef USTRAIN_HAVE_CUDA
  return cuda::device_uuid(index);
#else
  (void)index;
  return "";
#endif
}

namespace {

// Why device.type = "cuda" cannot run here.
UserError no_gpu() {
#ifdef USTRAIN_HAVE_CUDA
  return UserError("device.type = \"cuda\": no CUDA GPU visible (" + cuda::device_count_error() +
                   "; no driver, or CUDA_VISIBLE_DEVICES hides them); run on a machine with an NVIDIA GPU or "
                   "set device.type = \"cpu\"");
#else
  return UserError("device.type = \"cuda\": this ustrain was built without CUDA (no toolkit at build "
                   "time); rebuild where the CUDA toolkit and cuDNN are installed, or set device.type = \"cpu\"");
#endif
}

}  // namespace

std::string gpu_description(int index) {
  if (visible_gpus() == 0) throw no_gpu();
#ifdef USTRAIN_HAVE_CUDA
  return cuda::device_description(index);
#else
  (void)index;
  return "";
#endif
}

std::unique_ptr<Backend> make_backend(Device device, int threads, int device_index) {
  if (threads < 0)
    throw UserError("device.threads must be 0 (all cores) or a positive count, got " + std::to_string(threads));
  switch (device) {
    case Device::cpu:
      return std::make_unique<CpuMixedBackend>(threads);
    case Device::cuda: {
#ifdef USTRAIN_HAVE_CUDA
      if (cuda::device_count() > 0) return std::make_unique<cuda::CudaBackend>(device_index);
#else
      (void)device_index;
#endif
      throw no_gpu();
    }
  }
  USTRAIN_ASSERT(false, "unknown device");
  return nullptr;
}

}  // namespace ustrain
