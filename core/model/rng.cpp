#include "core/model/rng.h"

#include <cmath>
#include <numbers>

namespace ustrain {

namespace {

constexpr std::uint64_t kGoldenGamma = 0x9e3779b97f4a7c15ULL;  // splitmix64's increment
constexpr double kTwoPowMinus53 = 1.0 / 9007199254740992.0;

// Separate domains so that uniform_at and normal_at of one stream are unrelated.
constexpr std::uint64_t kUniformDomain = 0x5c2f1d3a9b4e6071ULL;
constexpr std::uint64_t kNormalDomain = 0xa3d95e0b7c481f26ULL;

// Word `counter` of the splitmix64 sequence seeded from (stream, domain). Mixing the
// stream first keeps nearby stream values (seed, seed + 1) far apart.
std::uint64_t word_at(std::uint64_t stream, std::uint64_t domain, std::uint64_t counter) {
  return mix64(mix64(stream ^ domain) + (counter + 1) * kGoldenGamma);
}

// The top 53 bits as a multiple of 2^-53 in [0, 1).
double unit_closed_open(std::uint64_t bits) {
  return static_cast<double>(bits >> 11) * kTwoPowMinus53;
}

// Centre of one of 2^53 equal cells: never 0 (log would be infinite) and never 1.
double unit_open(std::uint64_t bits) {
  return (static_cast<double>(bits >> 11) + 0.5) * kTwoPowMinus53;
}

}  // namespace

std::uint64_t mix64(std::uint64_t x) {
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

std::uint64_t hash_string(std::string_view s) {
  std::uint64_t h = 0xcbf29ce484222325ULL;  // FNV-1a 64 offset basis
  for (unsigned char c : s) {
    h ^= c;
    h *= 0x100000001b3ULL;  // FNV-1a 64 prime
  }
  return mix64(h);
}

double uniform_at(std::uint64_t stream, std::uint64_t index) {
  return unit_closed_open(word_at(stream, kUniformDomain, index));
}

double normal_at(std::uint64_t stream, std::uint64_t index) {
  const double u1 = unit_open(word_at(stream, kNormalDomain, 2 * index));
  const double u2 = unit_open(word_at(stream, kNormalDomain, 2 * index + 1));
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
}

void fill_normal(float* dst, std::size_t n, std::uint64_t stream, double stddev,
                 std::uint64_t offset) {
  for (std::size_t i = 0; i < n; ++i)
    dst[i] = static_cast<float>(stddev * normal_at(stream, offset + i));
}

std::uint64_t Rng::next_u64() {
  state_ += kGoldenGamma;
  return mix64(state_);
}

double Rng::uniform() { return unit_closed_open(next_u64()); }

}  // namespace ustrain
