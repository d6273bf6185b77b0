// `ustrain data inspect DIR`: what a dataset holds, as text for people: totals per split, a
// shard table, the tokenizer, a token-frequency summary and a few windows decoded to text.
#pragma once

#include <cstdint>
#include <string>

namespace ustrain {

struct InspectOptions {
  std::string dir;
  int samples = 3;                        // windows decoded to text
  std::int64_t sample_tokens = 64;        // tokens per window
  int top = 10;                           // most frequent ids listed
  std::int64_t count_tokens = 1 << 24;    // tokens counted at most (more: an even sample)
  bool verify = false;                    // also check every shard's checksum
  int max_shards = 20;                    // rows of the shard table per split (0: all)
  std::uint64_t seed = 1;                 // where the sample windows lie
};

// UserError for a dataset that does not open (see TokenDataset::open) or fails verification.
std::string inspect_dataset(const InspectOptions& options);

}  // namespace ustrain
