// A map whose values are made once per key, safely from several threads: the first thread to
// ask for a key makes its value while the others that ask for it wait for that one, so that a
// plan's workers never record or plan the same step twice.
#pragma once

#include <future>
#include <map>
#include <mutex>
#include <utility>

namespace ustrain {

template <class Key, class Value>
class OnceMap {
 public:
  // The value of `key`, made by `make()` if no thread made it yet.
  template <class Make>
  const Value& get(const Key& key, Make&& make) {
    std::promise<Value> promise;
    std::shared_future<Value> future;
    bool mine = false;
    {
      const std::lock_guard<std::mutex> lock(mutex_);
      const auto [it, inserted] = values_.try_emplace(key);
      if (inserted) it->second = promise.get_future().share();
      future = it->second;
      mine = inserted;
    }
    if (!mine) return future.get();  // made, or being made by another thread: wait for it
    try {
      promise.set_value(make());
    } catch (...) {
      promise.set_exception(std::current_exception());  // every thread that waits for it rethrows
    }
    return future.get();  // the map's copy keeps the value alive
  }

  std::size_t size() const {
    const std::lock_guard<std::mutex> lock(mutex_);
    return values_.size();
  }

 private:
  mutable std::mutex mutex_;
  std::map<Key, std::shared_future<Value>> values_;
};

}  // namespace ustrain
