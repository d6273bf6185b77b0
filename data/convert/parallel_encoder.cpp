#include "data/convert/parallel_encoder.h"

#include <fmt/format.h>

#include "data/tokenizers/regex_splitter.h"
#include "kernels/error.h"

namespace ustrain {
namespace {

// Big enough that handing a batch to a thread costs little next to tokenizing it.
constexpr std::size_t kBatchBytes = 1 << 20;
constexpr std::size_t kBatchDocuments = 4096;

}  // namespace

ParallelEncoder::ParallelEncoder(const Tokenizer* tokenizer, int workers, Sink sink, std::size_t in_flight_bytes)
    : tokenizer_(tokenizer), workers_(workers), sink_(std::move(sink)), max_in_flight_bytes_(in_flight_bytes) {
  if (workers_ > 1)
    for (int i = 0; i < workers_; ++i) threads_.emplace_back([this] { work(); });
}

ParallelEncoder::~ParallelEncoder() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  changed_.notify_all();
  for (std::thread& thread : threads_) thread.join();
}

void ParallelEncoder::encode(PendingDocument& document) const {
  if (!document.encode) return;
  USTRAIN_ASSERT(tokenizer_ != nullptr, "text document without a tokenizer");
  try {
    document.ids = tokenizer_->encode(document.text);
  } catch (const RegexLimitError& error) {  // one message, naming the document
    if (!document.origin.source) throw;
    throw UserError(fmt::format("{}: {}", document.origin.describe(), error.what()));
  }
  document.text = std::string();
  document.encode = false;
}

void ParallelEncoder::add(PendingDocument document) {
  if (workers_ <= 1) {
    encode(document);
    sink_(document);
    return;
  }
  batch_size_ += document.text.size() + document.ids.size() * sizeof(std::int32_t);
  batch_.push_back(std::move(document));
  if (batch_size_ >= kBatchBytes || batch_.size() >= kBatchDocuments) submit_batch();
}

void ParallelEncoder::submit_batch() {
  if (batch_.empty()) return;
  auto job = std::make_shared<Job>();
  job->documents = std::move(batch_);
  job->bytes = batch_size_;
  batch_.clear();
  batch_size_ = 0;
  {
    std::lock_guard lock(mutex_);
    queue_.push_back(job);
  }
  changed_.notify_all();
  in_flight_bytes_ += job->bytes;
  in_flight_.push_back(std::move(job));
  // Two batches per worker keep every worker busy without holding much text in memory.
  while (in_flight_.size() > static_cast<std::size_t>(2 * workers_) ||
         (in_flight_bytes_ > max_in_flight_bytes_ && in_flight_.size() > 1))
    drain_oldest();
}

void ParallelEncoder::drain_oldest() {
  std::shared_ptr<Job> job = std::move(in_flight_.front());
  in_flight_.pop_front();
  in_flight_bytes_ -= job->bytes;
  {
    std::unique_lock lock(mutex_);
    changed_.wait(lock, [&] { return job->done; });
  }
  if (job->error) std::rethrow_exception(job->error);
  for (PendingDocument& document : job->documents) sink_(document);
}

void ParallelEncoder::finish() {
  submit_batch();
  while (!in_flight_.empty()) drain_oldest();
}

void ParallelEncoder::work() {
  for (;;) {
    std::shared_ptr<Job> job;
    {
      std::unique_lock lock(mutex_);
      changed_.wait(lock, [&] { return stop_ || !queue_.empty(); });
      if (stop_) return;
      job = std::move(queue_.front());
      queue_.pop_front();
    }
    try {
      for (PendingDocument& document : job->documents) encode(document);
    } catch (...) {
      job->error = std::current_exception();
    }
    {
      std::lock_guard lock(mutex_);
      job->done = true;
    }
    changed_.notify_all();
  }
}

}  // namespace ustrain
