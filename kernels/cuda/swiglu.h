// SwiGLU on the fused gate/up projection on CUDA, as kernels/cpu/cpu_swiglu.cpp:
//   out = silu(gate) * up,   silu(g) = g * sigmoid(g)
// All tensors in the activation dtype `act` (f32, bf16 or f16); math in fp32.
#pragma once

#include <cstddef>
#include <cstdint>

#include <cuda_runtime_api.h>

#include "kernels/tensor.h"

namespace ustrain::cuda {

// out (N, F) = silu(gate) * up, with gate_up (N, 2F) = [gate | up].
void swiglu_forward(void* out, const void* gate_up, std::int64_t rows, std::int64_t ffn, DType act,
                    cudaStream_t stream);

// dgate_up (N, 2F) overwritten from dout (N, F) and gate_up (N, 2F); dgate_up may alias gate_up.
void swiglu_backward(void* dgate_up, const void* dout, const void* gate_up, std::int64_t rows, std::int64_t ffn,
                     DType act, cudaStream_t stream);

}  // namespace ustrain::cuda
