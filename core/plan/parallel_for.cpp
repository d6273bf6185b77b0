#include "core/plan/parallel_for.h"

#include <algorithm>
#include <atomic>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace ustrain {

void parallel_for(std::size_t count, int threads, const std::function<void(std::size_t)>& work,
                  const std::function<void(std::size_t)>& done) {
  const auto cores = static_cast<std::size_t>(std::max(1u, std::thread::hardware_concurrency()));
  const std::size_t n = std::min(count, threads > 0 ? static_cast<std::size_t>(threads) : cores);
  std::atomic<std::size_t> next{0};
  std::atomic<bool> failed{false};
  std::mutex mutex;  // guards `finished`, `error` and the calls to `done`
  std::size_t finished = 0;
  std::exception_ptr error;
  const auto run = [&] {
    for (std::size_t i = next++; i < count && !failed; i = next++) {
      try {
        work(i);
      } catch (...) {
        failed = true;  // first, so that the other threads stop taking work at once
        const std::lock_guard<std::mutex> lock(mutex);
        if (!error) error = std::current_exception();
        return;
      }
      const std::lock_guard<std::mutex> lock(mutex);
      if (done) done(++finished);
    }
  };
  std::vector<std::thread> pool;
  for (std::size_t t = 1; t < n; ++t) pool.emplace_back(run);
  run();
  for (std::thread& t : pool) t.join();
  if (error) std::rethrow_exception(error);
}

}  // namespace ustrain
