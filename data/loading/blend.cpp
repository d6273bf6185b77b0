#include "data/loading/blend.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include <fmt/format.h>

#include "kernels/error.h"

namespace ustrain {
namespace {

std::string trim(const std::string& text) {
  const auto first = text.find_first_not_of(" \t");
  if (first == std::string::npos) return "";
  return text.substr(first, text.find_last_not_of(" \t") - first + 1);
}

// Shares of `period` proportional to the weights, by largest remainders (ties to the earlier).
std::vector<std::uint64_t> round_quotas(const std::vector<double>& weights, std::uint64_t period) {
  const double total = std::accumulate(weights.begin(), weights.end(), 0.0);
  std::vector<std::uint64_t> quotas(weights.size());
  std::vector<double> remainders(weights.size());
  std::uint64_t given = 0;
  for (std::size_t d = 0; d < weights.size(); ++d) {
    const double exact = weights[d] / total * static_cast<double>(period);
    quotas[d] = static_cast<std::uint64_t>(std::floor(exact));
    remainders[d] = exact - std::floor(exact);
    given += quotas[d];
  }
  std::vector<std::size_t> order(weights.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return remainders[a] > remainders[b]; });
  for (std::size_t i = 0; given < period; ++i, ++given) ++quotas[order[i % order.size()]];
  return quotas;
}

}  // namespace

std::vector<BlendEntry> parse_blend(const std::string& spec) {
  std::vector<BlendEntry> entries;
  std::size_t start = 0;
  while (start <= spec.size()) {
    const std::size_t comma = std::min(spec.find(',', start), spec.size());
    const std::string entry = trim(spec.substr(start, comma - start));
    start = comma + 1;
    const std::size_t colon = entry.rfind(':');
    const auto bad = [&](const char* problem) {
      return UserError(fmt::format("blend \"{}\": entry \"{}\" {}; write DIR:WEIGHT entries separated by "
                                   "commas, e.g. \"data/web:0.7,data/code:0.3\"",
                                   abbreviate(spec), abbreviate(entry), problem));
    };
    if (colon == std::string::npos) throw bad("has no ':WEIGHT'");
    BlendEntry parsed;
    parsed.path = trim(entry.substr(0, colon));
    const std::string weight = trim(entry.substr(colon + 1));
    if (parsed.path.empty()) throw bad("has no dataset directory");
    std::size_t used = 0;
    try {
      parsed.weight = std::stod(weight, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || used != weight.size()) throw bad("has a weight that is not a number");
    if (!(parsed.weight > 0) || !std::isfinite(parsed.weight)) throw bad("has a weight that is not positive");
    entries.push_back(std::move(parsed));
  }
  return entries;
}

BlendSchedule::BlendSchedule(const std::vector<double>& weights) {
  USTRAIN_ASSERT(!weights.empty() && weights.size() < 65536, "a blend needs 1 to 65535 sources");
  for (double weight : weights)
    if (!(weight > 0) || !std::isfinite(weight))
      throw UserError(fmt::format("blend weight {} is not a positive number", weight));
  // One source needs no pattern: every position is its next sample.
  const std::uint64_t period = weights.size() == 1 ? 1 : kBlendPeriod;
  quotas_ = round_quotas(weights, period);
  for (std::size_t d = 0; d < weights.size(); ++d)
    if (quotas_[d] == 0)
      throw UserError(fmt::format("blend weight {} (source {} of {}) is below the blend's resolution of 1/{} of "
                                  "the samples: raise it or leave that dataset out",
                                  weights[d], d + 1, weights.size(), kBlendPeriod));
  // Position u goes to the source furthest behind its share: max over d of (u+1) q_d / P - taken_d,
  // compared as (u+1) q_d - taken_d P in integers.
  std::vector<std::uint64_t> taken(weights.size(), 0);
  source_of_.resize(period);
  rank_.resize(period);
  for (std::uint64_t u = 0; u < period; ++u) {
    std::size_t best = weights.size();
    std::int64_t best_lag = 0;
    for (std::size_t d = 0; d < weights.size(); ++d) {
      if (taken[d] == quotas_[d]) continue;
      const auto lag = static_cast<std::int64_t>((u + 1) * quotas_[d]) - static_cast<std::int64_t>(taken[d] * period);
      if (best == weights.size() || lag > best_lag) {
        best = d;
        best_lag = lag;
      }
    }
    source_of_[u] = static_cast<std::uint16_t>(best);
    rank_[u] = static_cast<std::uint32_t>(taken[best]++);
  }
}

BlendSchedule::Pick BlendSchedule::pick(std::uint64_t position) const {
  const std::uint64_t cycle = position / period(), within = position % period();
  const std::size_t source = source_of_[within];
  return {source, cycle * quotas_[source] + rank_[within]};
}

}  // namespace ustrain
