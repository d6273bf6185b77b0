// Training samples drawn from one or several token streams, in a deterministic order.
//
// A sample is a window of seq_len + 1 consecutive tokens of a stream: window w covers tokens
// [w*S, w*S + S] (S = seq_len), its first S tokens are the inputs and its last S the
// targets; consecutive windows share one token, and a stream of N tokens has
// W = (N - 1) / S windows. Documents are already packed in the stream, EOS between them.
//
// Sample positions 0, 1, 2, ... form one global sequence:
//   - position g picks source d and k, the index among d's samples (data/blend.h; with one
//     source, d = 0 and k = g);
//   - k falls in epoch e = k / W_d at place p = k mod W_d, and names window
//     IndexPermutation(W_d, derive(derive(seed, d), e))(p) when shuffling (windows shuffled
//     across all shards, a new order each epoch), else window p.
// Reader r of R takes positions r, r + R, r + 2R, ...: its j-th sample is position r + jR.
// Readers are disjoint, together they take every position, and the order is the same for
// any R, so a data-parallel layout change sees the same data.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "data/blend.h"
#include "data/token_source.h"

namespace ustrain {

struct LoaderSource {
  std::shared_ptr<const TokenSource> tokens;
  double weight = 1;
  std::string name;  // for messages, e.g. the dataset directory
};

// Positions [begin, begin + count) of a window.
struct TokenRun {
  std::int64_t begin = 0;
  std::int64_t count = 0;
};

struct LoaderOptions {
  std::int64_t seq_len = 0;
  std::uint64_t seed = 0;
  bool shuffle = true;
  int reader = 0;
  int num_readers = 1;
  // The parts of every window this process takes, one after the other (context parallelism
  // gives each rank two runs of every sequence, parallel/ring_attention.h); empty: all of it.
  // Readers, samples and positions are those of whole windows either way.
  std::vector<TokenRun> runs;
  // Document masking: the end-of-document id by which read_sample numbers the documents of
  // each window (data/document_ids.h); -1: no document ids.
  std::int32_t document_end = -1;
  // Tokens of one sample as this process holds it: the runs' total, or seq_len.
  std::int64_t sample_tokens() const;
  bool documents() const { return document_end >= 0; }
};

class Loader {
 public:
  // UserError if a source is shorter than one window of seq_len + 1 tokens, or a weight is bad.
  Loader(std::vector<LoaderSource> sources, LoaderOptions options);

  struct Origin {
    std::size_t source = 0;
    std::uint64_t epoch = 0;   // of that source
    std::uint64_t window = 0;  // within that source's stream
  };
  // Where this reader's sample j comes from.
  Origin origin(std::uint64_t sample) const;
  // Fills one sample: inputs[0, S) and targets[0, S) (S = options().sample_tokens(): this
  // process's runs of the window) and, when options().documents(), documents[0, seq_len): the
  // document of every input of the whole window, by position (attention under context
  // parallelism meets the keys of every run), which reads the window's inputs outside the runs
  // but nothing outside the window. Safe to call from several threads.
  void read_sample(std::uint64_t sample, std::int32_t* inputs, std::int32_t* targets,
                   std::int32_t* documents = nullptr) const;

  std::size_t sources() const { return sources_.size(); }
  const LoaderSource& source(std::size_t d) const { return sources_[d]; }
  std::uint64_t windows(std::size_t d) const { return windows_[d]; }
  const BlendSchedule& blend() const { return blend_; }
  const LoaderOptions& options() const { return options_; }

 private:
  std::vector<LoaderSource> sources_;
  LoaderOptions options_;
  std::vector<std::uint64_t> windows_;
  std::vector<std::uint64_t> source_seeds_;
  BlendSchedule blend_;
};

// One in-memory stream (tests, small data).
std::vector<LoaderSource> memory_source(std::shared_ptr<const std::vector<std::int32_t>> tokens);

}  // namespace ustrain
