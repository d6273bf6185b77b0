// Document ids of packed training windows, for the attention benchmarks (not a test): a stream
// of document lengths, either drawn from a geometric distribution of a given mean (a document
// ends after each token with the same chance: the work of causal attention within documents of
// mean L is then about 2 L / S of the whole window's) or read from a file (one length in
// tokens per line, e.g. a corpus's documents in order), cut into windows of S tokens as the
// loader packs them (a document runs on into the next window).
#pragma once

#include <cstdint>
#include <fstream>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

namespace ustrain::bench {

class DocumentLengths {
 public:
  // Geometric lengths of mean `mean` tokens (at least 1).
  DocumentLengths(double mean, std::uint32_t seed) : random_(seed), geometric_(1.0 / mean) {}
  // The lengths listed in `path`, in order, round and round.
  explicit DocumentLengths(const std::string& path) {
    std::ifstream in(path);
    for (std::int64_t n = 0; in >> n;)
      if (n > 0) listed_.push_back(n);
    if (listed_.empty()) throw std::runtime_error(path + ": no document lengths (one positive integer per line)");
  }
  std::int64_t next() {
    if (!listed_.empty()) return listed_[next_++ % listed_.size()];
    return 1 + geometric_(random_);
  }
  bool listed() const { return !listed_.empty(); }

 private:
  std::vector<std::int64_t> listed_;
  std::size_t next_ = 0;
  std::mt19937 random_;
  std::geometric_distribution<std::int64_t> geometric_;
};

// The ids of `windows` consecutive windows of `seq` tokens, (windows, seq): ids count the
// documents begun in the window, so the first (the tail of the previous one's) is 0.
inline std::vector<std::int32_t> packed_windows(DocumentLengths& lengths, std::int64_t windows, std::int64_t seq) {
  std::vector<std::int32_t> ids(static_cast<std::size_t>(windows * seq));
  std::int64_t left = lengths.next();
  for (std::int64_t w = 0; w < windows; ++w) {
    std::int32_t doc = 0;
    for (std::int64_t p = 0; p < seq; ++p, --left) {
      if (left == 0) {
        left = lengths.next();
        ++doc;
      }
      ids[static_cast<std::size_t>(w * seq + p)] = doc;
    }
  }
  return ids;
}

}  // namespace ustrain::bench
