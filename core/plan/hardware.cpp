#include "core/plan/hardware.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cctype>
#include <cmath>
#include <vector>

#include "core/run/cpu_threads.h"
#include "kernels/cpu/host_memory.h"
#include "kernels/error.h"
#include "kernels/library_workspace.h"

namespace ustrain {
namespace {

constexpr double kTera = 1e12, kGiga = 1e9;
constexpr std::size_t kGiB = std::size_t{1} << 30;

// The libraries' device memory, the same on every GPU here: a CUDA context (~500 MiB on
// Hopper), cuBLASLt's workspace (32 MiB, kernels/library_workspace.h), cuDNN's handle and
// its attention plans' own workspaces, and NCCL's buffers (a few hundred MiB for the groups of
// one rank): 1 GiB, so that a plan within it is not promised memory it lacks. The memory plan
// itself holds cuBLASLt's workspace (its library-workspace line) and the ops' scratch with
// cuDNN attention's staging (its op-scratch line, a few hundred MiB at long sequences): the
// allowance beside the plan is the rest.
constexpr std::size_t kGpuLibraryBytes = kGiB - library_workspace_bytes(Device::cuda);

// Sources:
//  H100 SXM5: NVIDIA H100 Tensor Core GPU datasheet (2023): 989 TFLOP/s dense BF16 (1979 with
//    sparsity), 67 TFLOP/s FP32, 80 GB HBM3 at 3.35 TB/s, NVLink 4 at 900 GB/s (450 GB/s each
//    way). Inter-node: DGX H100 user guide, eight 400 Gb/s ConnectX-7 ports, one per GPU
//    (50 GB/s each way per GPU).
//  H200 SXM: NVIDIA H200 datasheet (2024): 989 TFLOP/s dense BF16, 67 TFLOP/s FP32, 141 GB
//    HBM3e at 4.8 TB/s, NVLink 900 GB/s; DGX H200: one 400 Gb/s NIC per GPU.
//  A100 SXM4 80 GB: NVIDIA A100 datasheet (2021): 312 TFLOP/s dense BF16, 19.5 TFLOP/s FP32,
//    80 GB HBM2e at 2.04 TB/s, NVLink 3 at 600 GB/s (300 GB/s each way); DGX A100: eight
//    200 Gb/s HDR InfiniBand ports, one per GPU (25 GB/s each way).
//  Latencies: NCCL's per-hop latency is a few microseconds over NVLink and about ten over
//    InfiniBand (NCCL tests' small-message times).
Hardware gpu(std::string name, double bf16_tflops, double fp32_tflops, double memory_gb, double hbm_tb_s,
             double nvlink_gb_s_each_way, double nic_gb_s, std::string source) {
  Hardware h;
  h.name = std::move(name);
  h.peak_bf16_flops = bf16_tflops * kTera;
  h.peak_fp32_flops = fp32_tflops * kTera;
  h.memory_bytes = static_cast<std::size_t>(memory_gb * kGiga);
  h.memory_bytes_per_s = hbm_tb_s * kTera;
  h.intra_node_bytes_per_s = nvlink_gb_s_each_way * kGiga;
  h.inter_node_bytes_per_s = nic_gb_s * kGiga;
  h.intra_node_latency_s = 3e-6;
  h.inter_node_latency_s = 10e-6;
  h.library_bytes = kGpuLibraryBytes;
  h.source = std::move(source);
  return h;
}

// Bytes per second of a large copy on this machine (read + write), best of a few.
double measure_copy_bandwidth() {
  const std::size_t n = std::size_t{64} << 20;
  std::vector<char> a(n, 1), b(n, 0);
  double best = 0;
  for (int i = 0; i < 4; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    std::copy(a.begin(), a.end(), b.begin());
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    best = std::max(best, 2.0 * static_cast<double>(n) / s);
    a[static_cast<std::size_t>(i)] = b[n - 1];  // keep the copies
  }
  return best;
}

}  // namespace

Hardware gpu_hardware(const std::string& name) {
  if (name == "h100") return gpu("h100", 989, 67, 80, 3.35, 450, 50, "NVIDIA H100 SXM5 datasheet, DGX H100 guide");
  if (name == "h200") return gpu("h200", 989, 67, 141, 4.8, 450, 50, "NVIDIA H200 SXM datasheet, DGX H200 guide");
  if (name == "a100") return gpu("a100", 312, 19.5, 80, 2.04, 300, 25, "NVIDIA A100 SXM4 80 GB datasheet, DGX A100 guide");
  throw UserError(fmt::format("--gpu {}: unknown; choose h100, h200, a100 or cpu", name));
}

std::string described_gpu(const std::string& description) {
  std::string upper = description;
  for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  for (const auto& [model, name] : {std::pair{"H100", "h100"}, std::pair{"H200", "h200"}, std::pair{"A100", "a100"}})
    if (upper.find(model) != std::string::npos) return name;
  throw UserError(fmt::format("the planner knows the H100, H200 and A100, not this GPU ({}); set the layout by hand "
                              "(parallel.layout = \"manual\" with the keys `ustrain plan` proposes for the nearest "
                              "of them)",
                              description));
}

Hardware measure_cpu_hardware() {
  Hardware h;
  h.name = "cpu";
  h.cpu = true;
  h.cores = usable_cores();
  h.memory_bytes = host_available_bytes();
  h.memory_bytes_per_s = measure_copy_bandwidth();
  // Ranks on one host talk through shared memory: a message is copied in and out once each.
  h.intra_node_bytes_per_s = h.memory_bytes_per_s / 2;
  h.inter_node_bytes_per_s = 12.5 * kGiga;  // a 100 Gb/s Ethernet link, if ranks span hosts
  h.intra_node_latency_s = 5e-6;            // Open MPI's shared-memory transport
  h.inter_node_latency_s = 20e-6;
  h.source = fmt::format("this machine, measured now: {} cores, {:.1f} GB/s copy bandwidth", h.cores,
                         h.memory_bytes_per_s / kGiga);
  return h;
}

void check_plausible(std::string_view what, double value, const Plausible& range) {
  if (std::isfinite(value) && value >= range.lo && value <= range.hi) return;
  throw UserError(fmt::format("{} {} is not plausible: give {} between {} and {} ({})", what, value, range.unit,
                              range.lo, range.hi, range.example));
}

Hardware with_overrides(Hardware h, const HardwareOverrides& o) {
  // From a slow CPU core to well past any accelerator made so far.
  constexpr Plausible kPeak{1e-3, 1e5, "TFLOP/s per device", "an H100's dense bf16 peak is 989"};
  constexpr Plausible kMemory{1.0 / 1024, 65536, "GiB per device", "an H100 has 80 GB, 74.5 GiB"};
  constexpr Plausible kLink{1e-3, 1e5, "GB/s each way per device", "NVLink 4 carries 450, a 400 Gb/s NIC 50"};
  if (o.peak_tflops) check_plausible("--peak-tflops", *o.peak_tflops, kPeak);
  if (o.memory_gib) check_plausible("--memory-gib", *o.memory_gib, kMemory);
  if (o.intra_node_gbps) check_plausible("--intra-node-gbps", *o.intra_node_gbps, kLink);
  if (o.inter_node_gbps) check_plausible("--inter-node-gbps", *o.inter_node_gbps, kLink);
  if (o.peak_tflops) h.peak_bf16_flops = h.peak_fp32_flops = *o.peak_tflops * kTera;
  if (o.memory_gib) h.memory_bytes = static_cast<std::size_t>(*o.memory_gib * static_cast<double>(kGiB));
  if (o.intra_node_gbps) h.intra_node_bytes_per_s = *o.intra_node_gbps * kGiga;
  if (o.inter_node_gbps) h.inter_node_bytes_per_s = *o.inter_node_gbps * kGiga;
  return h;
}

}  // namespace ustrain
