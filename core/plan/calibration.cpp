#include "core/plan/calibration.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "data/files/json_input.h"
#include "data/files/regular_file.h"
#include "kernels/error.h"

namespace ustrain {

double EfficiencyCurve::rate(double flops) const {
  USTRAIN_ASSERT(!points.empty(), "an empty efficiency curve");
  if (flops <= points.front().first) return points.front().second;
  if (flops >= points.back().first) return points.back().second;
  const auto hi = std::upper_bound(points.begin(), points.end(), flops,
                                   [](double f, const std::pair<double, double>& p) { return f < p.first; });
  const auto lo = hi - 1;
  const double t = (std::log(flops) - std::log(lo->first)) / (std::log(hi->first) - std::log(lo->first));
  return lo->second + t * (hi->second - lo->second);
}

Calibration default_gpu_calibration(const Hardware& hw, DType compute) {
  const double peak = hw.peak_flops(compute);
  Calibration c;
  for (const auto& [flops, fraction] : {std::pair{1e8, 0.10}, {1e9, 0.35}, {1e10, 0.60}, {1e11, 0.72}, {1e12, 0.78}})
    c.gemm.points.emplace_back(flops, fraction * peak);
  for (const auto& [flops, fraction] : {std::pair{1e8, 0.10}, {1e9, 0.25}, {1e10, 0.40}, {1e11, 0.50}, {1e12, 0.55}})
    c.attention.points.emplace_back(flops, fraction * peak);
  c.memory_bytes_per_s = 0.8 * hw.memory_bytes_per_s;
  c.op_overhead_s = 5e-6;
  c.source = fmt::format("documented defaults for {} (fractions of its published peak; a prediction)", hw.name);
  return c;
}

namespace {

nlohmann::json curve_json(const EfficiencyCurve& c) {
  nlohmann::json points = nlohmann::json::array();
  for (const auto& [flops, rate] : c.points) points.push_back({{"flops", flops}, {"flops_per_s", rate}});
  return points;
}

// What a calibration file may hold: beyond these the step times overflow or vanish.
constexpr Plausible kCallFlops{1, 1e20, "FLOPs per call", "a 4096 x 4096 x 4096 GEMM is 1.4e11"};
constexpr Plausible kFlopsPerSecond{1e6, 1e18, "FLOP/s", "an H100 reaches about 7.5e14 on large bf16 GEMMs"};
constexpr Plausible kBytesPerSecond{1e6, 1e16, "bytes/s", "an H100's HBM3 moves 3.35e12"};
constexpr Plausible kOverhead{0, 1, "seconds per op", "a kernel launch takes about 5e-6"};

EfficiencyCurve curve_of(const nlohmann::json& j, const std::string& path, const char* key) {
  EfficiencyCurve c;
  for (const auto& p : j.at(key)) {
    c.points.emplace_back(p.at("flops").get<double>(), p.at("flops_per_s").get<double>());
    check_plausible(fmt::format("\"{}\" flops", key), c.points.back().first, kCallFlops);
    check_plausible(fmt::format("\"{}\" flops_per_s", key), c.points.back().second, kFlopsPerSecond);
  }
  const bool ascending = std::is_sorted(c.points.begin(), c.points.end()) &&
                         std::all_of(c.points.begin(), c.points.end(), [](auto& p) { return p.first > 0 && p.second > 0; });
  if (c.points.empty() || !ascending)
    throw UserError(fmt::format("{}: \"{}\" needs points of positive flops and flops_per_s in ascending flops; write "
                                "the file with `ustrain bench RECIPE --calibration-out FILE`",
                                path, key));
  return c;
}

}  // namespace

Calibration read_calibration(const std::string& path) {
  std::string text;
  try {
    text = read_regular_file(path);
  } catch (const UserError& e) {
    throw UserError(fmt::format("--calibration: {}; give a file written by `ustrain bench RECIPE --calibration-out "
                                "FILE`", e.what()));
  }
  try {
    const nlohmann::json j = parse_json(text, path);
    Calibration c;
    c.gemm = curve_of(j, path, "gemm");
    c.attention = curve_of(j, path, "attention");
    c.memory_bytes_per_s = j.at("memory_bytes_per_s").get<double>();
    c.op_overhead_s = j.value("op_overhead_s", 0.0);
    c.source = fmt::format("{} ({})", path, j.value("source", std::string("calibration file")));
    check_plausible("memory_bytes_per_s", c.memory_bytes_per_s, kBytesPerSecond);
    check_plausible("op_overhead_s", c.op_overhead_s, kOverhead);
    return c;
  } catch (const nlohmann::json::exception& e) {
    throw UserError(fmt::format("--calibration {}: not a calibration file ({}); write one with `ustrain bench RECIPE "
                                "--calibration-out FILE`", path, e.what()));
  } catch (const UserError& e) {
    if (std::string(e.what()).starts_with(path)) throw;
    throw UserError(fmt::format("--calibration {}: {}; write one with `ustrain bench RECIPE --calibration-out FILE`",
                                path, e.what()));
  }
}

void write_calibration(const Calibration& c, const std::string& path) {
  const nlohmann::json j = {{"gemm", curve_json(c.gemm)},
                            {"attention", curve_json(c.attention)},
                            {"memory_bytes_per_s", c.memory_bytes_per_s},
                            {"op_overhead_s", c.op_overhead_s},
                            {"source", c.source}};
  std::ofstream out(path);
  out << j.dump(2) << '\n';
  if (!out) throw UserError(fmt::format("--calibration-out {}: cannot be written", path));
}

}  // namespace ustrain
