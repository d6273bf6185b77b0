// Batches of one reader's samples, made ahead of time on a background thread so that a
// training step finds its data ready. The thread reads only memory-mapped shards (no HDF5),
// so the training thread may use HDF5 meanwhile. An error on the thread (a damaged shard, an
// id outside the vocabulary) is raised by the next() that would have returned its batch.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "data/loader.h"
#include "kernels/token_batch.h"

namespace ustrain {

class BatchPrefetcher {
 public:
  // Batches of `batch` consecutive samples of the loader's reader, from sample `start` on,
  // kept up to `depth` batches ahead; depth 0 reads on the caller's thread instead.
  BatchPrefetcher(std::shared_ptr<const Loader> loader, std::int64_t batch, int depth, std::uint64_t start = 0);
  BatchPrefetcher(const BatchPrefetcher&) = delete;
  BatchPrefetcher& operator=(const BatchPrefetcher&) = delete;
  ~BatchPrefetcher();

  // The next batch of `batch` samples (position() was its first); it stays valid until the
  // next call to next() or seek().
  TokenBatch next();
  // This reader's index of the first sample the next batch will hold.
  std::uint64_t position() const { return position_; }
  // Continues from sample `sample`, dropping batches made ahead.
  void seek(std::uint64_t sample);
  // Seconds next() has spent waiting for the background thread, in total.
  double wait_seconds() const { return wait_seconds_; }
  const Loader& loader() const { return *loader_; }

 private:
  // The memory of one batch.
  struct Buffers {
    std::vector<std::int32_t> ids, targets;
    std::vector<std::int32_t> documents;  // empty unless the loader numbers documents
    std::uint64_t first_sample = 0;  // this reader's index of the batch's first sample
  };

  void start_thread();
  void stop_thread();
  void produce();
  void fill(Buffers& batch, std::uint64_t first);
  static TokenBatch view(const Buffers& batch);

  std::shared_ptr<const Loader> loader_;
  std::int64_t batch_;
  int depth_;
  std::uint64_t position_ = 0;
  double wait_seconds_ = 0;
  std::unique_ptr<Buffers> current_;

  // Shared with the thread, under mutex_.
  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<std::unique_ptr<Buffers>> ready_;
  std::vector<std::unique_ptr<Buffers>> free_;
  std::exception_ptr error_;
  std::uint64_t produce_at_ = 0;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace ustrain
