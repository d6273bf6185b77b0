#include "data/prefetcher.h"

#include <chrono>

#include "kernels/error.h"

namespace ustrain {

BatchPrefetcher::BatchPrefetcher(std::shared_ptr<const Loader> loader, std::int64_t batch, int depth,
                                 std::uint64_t start)
    : loader_(std::move(loader)), batch_(batch), depth_(depth), position_(start) {
  USTRAIN_ASSERT(loader_ != nullptr && batch_ > 0 && depth_ >= 0, "bad prefetcher arguments");
  const auto size = static_cast<std::size_t>(batch_ * loader_->options().sample_tokens());
  // depth batches made ahead plus the one the caller holds.
  for (int i = 0; i <= depth_; ++i) {
    auto buffer = std::make_unique<Buffers>();
    buffer->ids.resize(size);
    buffer->targets.resize(size);
    if (loader_->options().documents())  // whole windows' (data/loader.h)
      buffer->documents.resize(static_cast<std::size_t>(batch_ * loader_->options().seq_len));
    free_.push_back(std::move(buffer));
  }
  produce_at_ = start;
  start_thread();
}

BatchPrefetcher::~BatchPrefetcher() { stop_thread(); }

void BatchPrefetcher::fill(Buffers& batch, std::uint64_t first) {
  batch.first_sample = first;
  const std::int64_t seq = loader_->options().sample_tokens();
  const bool documents = !batch.documents.empty();
  const std::int64_t window = loader_->options().seq_len;
  for (std::int64_t b = 0; b < batch_; ++b)
    loader_->read_sample(first + static_cast<std::uint64_t>(b), batch.ids.data() + b * seq,
                         batch.targets.data() + b * seq, documents ? batch.documents.data() + b * window : nullptr);
}

TokenBatch BatchPrefetcher::view(const Buffers& batch) {
  TokenBatch tokens(batch.ids, batch.targets);
  tokens.documents = batch.documents;
  return tokens;
}

void BatchPrefetcher::start_thread() {
  if (depth_ == 0) return;
  stop_ = false;
  thread_ = std::thread([this] { produce(); });
}

void BatchPrefetcher::stop_thread() {
  if (!thread_.joinable()) return;
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  changed_.notify_all();
  thread_.join();
}

void BatchPrefetcher::produce() {
  for (;;) {
    std::unique_ptr<Buffers> buffer;
    std::uint64_t first = 0;
    {
      std::unique_lock lock(mutex_);
      changed_.wait(lock, [&] { return stop_ || (!free_.empty() && ready_.size() < static_cast<std::size_t>(depth_)); });
      if (stop_) return;
      buffer = std::move(free_.back());
      free_.pop_back();
      first = produce_at_;
      produce_at_ += static_cast<std::uint64_t>(batch_);
    }
    try {
      fill(*buffer, first);
    } catch (...) {
      std::lock_guard lock(mutex_);
      error_ = std::current_exception();
      free_.push_back(std::move(buffer));
      changed_.notify_all();
      return;
    }
    {
      std::lock_guard lock(mutex_);
      ready_.push_back(std::move(buffer));
    }
    changed_.notify_all();
  }
}

TokenBatch BatchPrefetcher::next() {
  if (depth_ == 0) {
    if (!current_) {
      current_ = std::move(free_.back());
      free_.pop_back();
    }
    fill(*current_, position_);
    position_ += static_cast<std::uint64_t>(batch_);
    return view(*current_);
  }
  const auto started = std::chrono::steady_clock::now();
  {
    std::unique_lock lock(mutex_);
    if (current_) free_.push_back(std::move(current_));
    changed_.notify_all();
    changed_.wait(lock, [&] { return !ready_.empty() || error_; });
    if (ready_.empty()) std::rethrow_exception(error_);
    current_ = std::move(ready_.front());
    ready_.pop_front();
  }
  changed_.notify_all();
  wait_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  USTRAIN_ASSERT(current_->first_sample == position_, "prefetched batch out of order");
  position_ += static_cast<std::uint64_t>(batch_);
  return view(*current_);
}

void BatchPrefetcher::seek(std::uint64_t sample) {
  stop_thread();
  if (current_) free_.push_back(std::move(current_));
  while (!ready_.empty()) {
    free_.push_back(std::move(ready_.front()));
    ready_.pop_front();
  }
  error_ = nullptr;
  position_ = sample;
  produce_at_ = sample;
  start_thread();
}

}  // namespace ustrain
