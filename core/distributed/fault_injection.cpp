#include "core/distributed/fault_injection.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <charconv>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "kernels/error.h"

namespace ustrain {
namespace {

constexpr const char* kVariable = "USTRAIN_INJECT_FAULT";
// The top mantissa bit of an fp32 value: the value changes by up to a half, and stays finite.
constexpr int kFlippedBit = 22;

[[noreturn]] void malformed(std::string_view fault, std::string_view why) {
  throw UserError(
      fmt::format("{}: '{}' {}; the accepted faults are bitflip:rank=R:step=S, gradflip:rank=R:step=S and "
                  "slow:rank=R:ms=M (several separated by commas)",
                  kVariable, fault, why));
}

// The value of `key=` in the next ':'-separated field of `rest`, a non-negative integer.
std::int64_t field(std::string_view fault, std::string_view& rest, std::string_view key) {
  const std::size_t colon = rest.find(':');
  const std::string_view item = rest.substr(0, colon);
  rest = colon == std::string_view::npos ? std::string_view{} : rest.substr(colon + 1);
  if (item.size() <= key.size() || item.substr(0, key.size()) != key || item[key.size()] != '=')
    malformed(fault, fmt::format("lacks {}=", key));
  std::int64_t v = -1;
  const std::string_view digits = item.substr(key.size() + 1);
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), v);
  if (ec != std::errc{} || end != digits.data() + digits.size() || v < 0)
    malformed(fault, fmt::format("has {}={}, not a non-negative integer", key, digits));
  return v;
}

}  // namespace

InjectedFaults InjectedFaults::from_environment() {
  const char* spec = std::getenv(kVariable);
  return spec == nullptr ? InjectedFaults{} : parse(spec);
}

InjectedFaults InjectedFaults::parse(std::string_view spec) {
  InjectedFaults faults;
  while (!spec.empty()) {
    const std::size_t comma = spec.find(',');
    const std::string_view fault = spec.substr(0, comma);
    spec = comma == std::string_view::npos ? std::string_view{} : spec.substr(comma + 1);
    const std::size_t colon = fault.find(':');
    const std::string_view kind = fault.substr(0, colon);
    std::string_view rest = colon == std::string_view::npos ? std::string_view{} : fault.substr(colon + 1);
    if (kind == "bitflip" || kind == "gradflip") {
      const auto rank = static_cast<int>(field(fault, rest, "rank"));
      const std::int64_t step = field(fault, rest, "step");
      faults.flips_.push_back({rank, step, kind == "bitflip" ? ParamState::value : ParamState::grad});
    } else if (kind == "slow") {
      const auto rank = static_cast<int>(field(fault, rest, "rank"));
      faults.slow_.push_back({rank, field(fault, rest, "ms")});
    } else {
      malformed(fault, "is not a fault this build knows");
    }
    if (!rest.empty()) malformed(fault, fmt::format("has '{}' left over", rest));
  }
  return faults;
}

void InjectedFaults::after_update(std::int64_t step, int rank, const ModelParams& params, Backend& backend) const {
  flip(step, rank, ParamState::value, params, backend);
}

void InjectedFaults::after_reduction(std::int64_t step, int rank, const ModelParams& params, Backend& backend) const {
  flip(step, rank, ParamState::grad, params, backend);
}

void InjectedFaults::flip(std::int64_t step, int rank, ParamState state, const ModelParams& params,
                          Backend& backend) const {
  for (const BitFlip& f : flips_) {
    if (f.rank != rank || f.step != step || f.state != state) continue;
    const std::vector<ParamPiece> held = params.held(state);
    if (held.empty()) continue;
    const ParamPiece& piece = held.front();
    float value = 0;
    const Tensor host(&value, Shape{1});
    const Tensor element = piece.data.view(Shape{piece.data.numel()}).slice(0, 1);
    backend.synchronize();
    backend.copy(host, element);
    std::uint32_t bits = 0;
    std::memcpy(&bits, &value, sizeof bits);
    bits ^= std::uint32_t{1} << kFlippedBit;
    const float before = value;
    std::memcpy(&value, &bits, sizeof bits);
    backend.copy(element, host);
    backend.synchronize();
    spdlog::warn("{}: rank {} flipped bit {} of {}{}[{}] {} step {} ({} -> {})", kVariable, rank, kFlippedBit,
                 state == ParamState::grad ? "the gradient of " : "", params.spec(piece.param).name, piece.begin,
                 state == ParamState::grad ? "in" : "after", step, before, value);
  }
}

void InjectedFaults::delay(int rank) const {
  for (const Slowdown& s : slow_)
    if (s.rank == rank) std::this_thread::sleep_for(std::chrono::milliseconds(s.ms));
}

}  // namespace ustrain
