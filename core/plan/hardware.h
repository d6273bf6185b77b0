// What the planner prices a layout on: one kind of accelerator (or this machine's CPU), its
// memory and the links between ranks. GPU figures are published numbers (sources in
// hardware.cpp), so every GPU time the planner prints is a prediction; `cpu` is measured here.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include "kernels/backend.h"

namespace ustrain {

struct Hardware {
  std::string name;               // "h100", "h200", "a100", "cpu"
  bool cpu = false;               // ranks are CPU processes of this machine (device.type = "cpu")
  double peak_bf16_flops = 0;     // dense, per device (bf16 and fp16)
  double peak_fp32_flops = 0;     // fp32 GEMMs as the backend runs them (no TF32)
  std::size_t memory_bytes = 0;   // per device; on the CPU the host's available memory, all ranks together
  double memory_bytes_per_s = 0;  // HBM (DRAM on the CPU)
  double intra_node_bytes_per_s = 0;  // per device and direction (NVLink; shared memory on the CPU)
  double inter_node_bytes_per_s = 0;  // per device and direction (the NIC each GPU has)
  double intra_node_latency_s = 0, inter_node_latency_s = 0;  // per message hop
  // Device memory the libraries hold outside the plan: the CUDA context, cuBLASLt's 32 MiB
  // workspace, cuDNN's attention plans and NCCL's buffers. 0 on the CPU.
  std::size_t library_bytes = 0;
  int cores = 0;  // CPU: cores the ranks of this machine share
  std::string source;

  double peak_flops(DType compute) const { return compute == DType::f32 ? peak_fp32_flops : peak_bf16_flops; }
};

// What --peak-tflops, --memory-gib, --intra-node-gbps and --inter-node-gbps replace (GB/s).
struct HardwareOverrides {
  std::optional<double> peak_tflops, memory_gib, intra_node_gbps, inter_node_gbps;
};

// A physically plausible range for a number the planner takes from the user (an option, a
// calibration file): beyond it the predictions overflow to infinity or round to nothing.
struct Plausible {
  double lo, hi;        // inclusive
  const char* unit;     // "TFLOP/s per device"
  const char* example;  // "an H100's dense bf16 peak is 989"
};
// UserError "WHAT VALUE is not plausible: give UNIT between LO and HI (EXAMPLE)" unless
// `value` is a finite number within `range`.
void check_plausible(std::string_view what, double value, const Plausible& range);

// The published description of "h100" (SXM), "h200" (SXM) or "a100" (SXM 80 GB); UserError
// for another name.
Hardware gpu_hardware(const std::string& name);
// The name gpu_hardware knows for a GPU as the driver describes it ("NVIDIA H100 80GB HBM3 ..."
// is "h100"); UserError for a GPU the planner has no figures for.
std::string described_gpu(const std::string& description);
// This machine: its cores, available memory and memory bandwidth (measured now, about a second).
Hardware measure_cpu_hardware();
// `hw` with the overrides that are given; UserError for one outside its plausible range.
Hardware with_overrides(Hardware hw, const HardwareOverrides& o);

}  // namespace ustrain
