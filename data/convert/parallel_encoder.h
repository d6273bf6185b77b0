// Tokenizes documents on worker threads while the caller keeps reading and writing, and hands
// them back in the order they came in, so the output does not depend on the thread count.
// Only tokenizing runs on the workers; the sink (which writes HDF5) runs on the caller's thread.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "data/shards/dataset.h"
#include "data/inputs/document_sink.h"
#include "data/tokenizers/tokenizer.h"

namespace ustrain {

struct PendingDocument {
  std::string text;               // to tokenize, when `encode` is set
  std::vector<std::int32_t> ids;  // the ids (filled in from text by the encoder)
  bool encode = false;
  bool starts = true, ends = true;  // document pieces, as in DocumentSink::add_tokens
  std::optional<Split> split;
  DocumentOrigin origin;  // text: where it came from, for a tokenizer's error about it
};

// Text handed to the workers and not yet back, in bytes: past it, add() waits for the oldest
// batch. Real documents are small enough that this never holds the workers back; long ones
// (up to the maximum document size) would otherwise be in flight two per worker, and
// tokenizing takes several times a document's size in memory.
inline constexpr std::size_t kDefaultInFlightBytes = std::size_t{64} << 20;

class ParallelEncoder {
 public:
  using Sink = std::function<void(PendingDocument&)>;
  // workers <= 1 tokenizes on the caller's thread.
  ParallelEncoder(const Tokenizer* tokenizer, int workers, Sink sink,
                  std::size_t in_flight_bytes = kDefaultInFlightBytes);
  ParallelEncoder(const ParallelEncoder&) = delete;
  ParallelEncoder& operator=(const ParallelEncoder&) = delete;
  ~ParallelEncoder();

  void add(PendingDocument document);
  // Passes every remaining document to the sink; rethrows a worker's exception.
  void finish();

 private:
  struct Job {
    std::vector<PendingDocument> documents;
    std::size_t bytes = 0;
    bool done = false;
    std::exception_ptr error;
  };
  void encode(PendingDocument& document) const;
  void submit_batch();
  void drain_oldest();
  void work();

  const Tokenizer* tokenizer_;
  int workers_;
  Sink sink_;
  std::vector<PendingDocument> batch_;
  std::size_t batch_size_ = 0;  // bytes of text plus ids in batch_
  std::deque<std::shared_ptr<Job>> in_flight_;  // in submission order
  std::size_t in_flight_bytes_ = 0;             // of the jobs in in_flight_
  std::size_t max_in_flight_bytes_;

  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<std::shared_ptr<Job>> queue_;  // not yet taken by a worker
  bool stop_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace ustrain
