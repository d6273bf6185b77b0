// Mixing several datasets by weight.
//
// The blended stream interleaves the sources in a fixed pattern that repeats every
// kBlendPeriod samples. In each period source d supplies q_d samples, its weight's share of
// the period rounded by largest remainders (so weights resolve to 1/kBlendPeriod), and the
// pattern places each sample where that source is furthest behind its share. Every prefix of
// the stream is therefore within one sample per source of the exact proportions, and the
// source of any position, with its index among that source's samples, is found in O(1):
// resuming needs only the position.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ustrain {

inline constexpr std::uint64_t kBlendPeriod = 10000;

struct BlendEntry {
  std::string path;
  double weight = 1;
};

// Parses "dirA:0.7,dirB:0.3" (the weight follows the last ':' of an entry; weights are
// positive and need not sum to 1). UserError quoting the spec and the bad entry.
std::vector<BlendEntry> parse_blend(const std::string& spec);

class BlendSchedule {
 public:
  // UserError if a weight is not positive or rounds to no sample in a period.
  explicit BlendSchedule(const std::vector<double>& weights);

  struct Pick {
    std::size_t source = 0;
    std::uint64_t index = 0;  // how many earlier positions chose the same source
  };
  Pick pick(std::uint64_t position) const;

  std::size_t sources() const { return quotas_.size(); }
  std::uint64_t period() const { return source_of_.size(); }
  std::uint64_t quota(std::size_t source) const { return quotas_[source]; }

 private:
  std::vector<std::uint64_t> quotas_;
  std::vector<std::uint16_t> source_of_;  // per position of a period
  std::vector<std::uint32_t> rank_;       // per position: index among its source's in the period
};

}  // namespace ustrain
