// A calibration file, the planner's input besides the recipe (`ustrain plan --calibration`).
// One that reads must give a finite, positive rate at any call size, and must read back the
// same numbers once written as `ustrain bench --calibration-out` writes it.
#include <cmath>
#include <cstdint>
#include <cstdlib>

#include "core/plan/calibration.h"
#include "fuzz/fuzz_support.h"
#include "kernels/error.h"

namespace {

void check_rates(const ustrain::EfficiencyCurve& curve) {
  for (double flops : {0.5, 1.0, 1e3, 1e8, 3.3e11, 1e20, 1e30}) {
    const double rate = curve.rate(flops);
    if (!std::isfinite(rate) || rate <= 0) std::abort();
  }
  for (const auto& [flops, rate] : curve.points)
    if (curve.rate(flops) <= 0 || !std::isfinite(curve.rate(flops * 1.5))) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  ustrain::Calibration read;
  try {
    read = ustrain::read_calibration(ustrain::fuzz::write_scratch("calibration.json", data, size));
  } catch (const ustrain::UserError&) {
    return 0;
  }
  check_rates(read.gemm);
  check_rates(read.attention);
  const std::string copy = ustrain::fuzz::scratch_dir() + "/written.json";
  ustrain::write_calibration(read, copy);
  const ustrain::Calibration again = ustrain::read_calibration(copy);
  if (again.gemm.points != read.gemm.points || again.attention.points != read.attention.points ||
      again.memory_bytes_per_s != read.memory_bytes_per_s || again.op_overhead_s != read.op_overhead_s)
    std::abort();
  return 0;
}
