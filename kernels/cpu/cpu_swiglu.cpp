// SwiGLU on the fused gate/up projection: out = silu(gate) * up, silu(g) = g * sigmoid(g).
#include <cstdint>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/cpu_math.h"

namespace ustrain {
namespace {

constexpr std::int64_t kParallelMin = 1 << 15;

}  // namespace

void CpuBackend::swiglu_forward(Tensor out, Tensor gate_up) {
  const std::int64_t rows = gate_up.shape.rows();
  const std::int64_t hidden = out.shape.last();
  USTRAIN_ASSERT(gate_up.shape.last() == 2 * hidden && out.shape.rows() == rows,
                 "gate_up " + gate_up.shape.str() + " vs out " + out.shape.str());
  float* o = out.f32();             // (N, F)
  const float* gu = gate_up.f32();  // (N, 2F) = [gate | up]
#pragma omp parallel for schedule(static) num_threads(threads_) if (rows * hidden >= kParallelMin)
  for (std::int64_t n = 0; n < rows; ++n) {
    const float* g = gu + n * 2 * hidden;
    const float* u = g + hidden;
    float* orow = o + n * hidden;
    for (std::int64_t i = 0; i < hidden; ++i) orow[i] = g[i] * cpu::sigmoid(g[i]) * u[i];
  }
}

void CpuBackend::swiglu_backward(Tensor dgate_up, Tensor dout, Tensor gate_up) {
  const std::int64_t rows = gate_up.shape.rows();
  const std::int64_t hidden = dout.shape.last();
  USTRAIN_ASSERT(gate_up.shape.last() == 2 * hidden && dout.shape.rows() == rows,
                 "gate_up " + gate_up.shape.str() + " vs dout " + dout.shape.str());
  USTRAIN_ASSERT(dgate_up.shape == gate_up.shape, "dgate_up " + dgate_up.shape.str() + " vs " + gate_up.shape.str());
  float* d = dgate_up.f32();        // (N, 2F)
  const float* dy = dout.f32();     // (N, F)
  const float* gu = gate_up.f32();  // (N, 2F)
#pragma omp parallel for schedule(static) num_threads(threads_) if (rows * hidden >= kParallelMin)
  for (std::int64_t n = 0; n < rows; ++n) {
    const float* g = gu + n * 2 * hidden;
    const float* u = g + hidden;
    const float* dyr = dy + n * hidden;
    float* dg = d + n * 2 * hidden;
    float* du = dg + hidden;
    for (std::int64_t i = 0; i < hidden; ++i) {
      const float sig = cpu::sigmoid(g[i]);
      const float gi = g[i], ui = u[i], dyi = dyr[i];  // read before writing: d may alias gate_up
      // d silu(g) / dg = sig * (1 + g * (1 - sig))
      dg[i] = dyi * ui * sig * (1.0f + gi * (1.0f - sig));
      du[i] = dyi * gi * sig;
    }
  }
}

}  // namespace ustrain
