// Turns a split's token stream into training samples for one data-parallel reader.
//
// Samples are windows of seq_len + 1 consecutive tokens: window w covers tokens
// [w*seq_len, w*seq_len + seq_len], so consecutive windows share one token and the stream's
// last partial window is unused. With shuffle, epoch e visits the windows in the order
// portable_permutation(W, SplitMix64::derive(seed, e)) (data/portable_random.h), where W is the
// number of windows; the same seed gives the same order on every machine. Reader r of R takes
// positions r, r+R, r+2R, ... of that order, floor(W/R) of them, so readers are disjoint and
// the W mod R windows at the end of the order are dropped from that epoch for every reader
// alike. Without shuffle (validation), the order is 0, 1, 2, ... and readers stride the same way.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

namespace ustrain {

struct LoaderState {
  std::uint64_t epoch = 0;
  std::uint64_t index = 0;  // samples of this epoch already taken by this reader
};

class Loader {
 public:
  // UserError if the stream is shorter than one window or has fewer windows than readers.
  Loader(std::shared_ptr<const std::vector<std::int32_t>> tokens, std::int64_t seq_len,
         std::uint64_t seed, bool shuffle, int reader = 0, int num_readers = 1);

  // Fills `batch` samples: inputs (batch, seq_len) and targets (batch, seq_len), the targets
  // being the inputs shifted by one token. Rolls over to the next epoch when the windows run out.
  void next(std::int32_t* inputs, std::int32_t* targets, std::int64_t batch);

  std::int64_t windows_per_epoch() const { return windows_per_reader_; }  // for this reader
  LoaderState state() const { return state_; }
  // Continues from a saved position; UserError if it lies beyond this reader's epoch (the data
  // or the layout changed since the position was saved).
  void restore(const LoaderState& state);

 private:
  void start_epoch(std::uint64_t epoch);

  std::shared_ptr<const std::vector<std::int32_t>> tokens_;
  std::int64_t seq_len_;
  std::uint64_t seed_;
  bool shuffle_;
  int reader_;
  int num_readers_;
  std::int64_t windows_ = 0;             // in the whole stream
  std::int64_t windows_per_reader_ = 0;
  std::vector<std::uint64_t> order_;     // this reader's windows for the current epoch
  LoaderState state_;
};

}  // namespace ustrain
