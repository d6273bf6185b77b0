#include "core/distributed/gradient_reducer.h"

#include <algorithm>
#include <chrono>

namespace ustrain {

GradientReducer::GradientReducer(const ParamStore& store, Communicator& group, std::size_t bucket_bytes)
    : group_(group) {
  const ParamRegistry& params = store.registry();
  const int n = static_cast<int>(params.specs().size());
  std::vector<int> order;
  for (const ParamUnit& unit : store.units()) order.insert(order.end(), unit.params.begin(), unit.params.end());
  const auto address = [&](int p) { return static_cast<const char*>(params[p].grad.data); };
  std::sort(order.begin(), order.end(), [&](int a, int b) { return address(a) < address(b); });

  bucket_of_.assign(static_cast<std::size_t>(n), -1);
  const char* begin = nullptr;
  const char* end = nullptr;
  const auto close = [&] {
    if (begin == nullptr) return;
    const auto floats = static_cast<std::int64_t>((end - begin) / static_cast<std::ptrdiff_t>(sizeof(float)));
    buckets_.back().grads = Tensor(const_cast<char*>(begin), Shape{floats}, DType::f32, params[order[0]].grad.device);
    begin = nullptr;
  };
  for (int p : order) {
    const Tensor& g = params[p].grad;
    USTRAIN_ASSERT(g.dtype == DType::f32, "gradient buckets hold f32 gradients");
    if (begin == nullptr) {
      buckets_.emplace_back();
      begin = address(p);
    }
    // Padding between two parameters rides along: it is zero on every rank, and stays zero.
    end = address(p) + g.bytes();
    bucket_of_[static_cast<std::size_t>(p)] = static_cast<int>(buckets_.size() - 1);
    ++buckets_.back().params;
    if (static_cast<std::size_t>(end - begin) >= bucket_bytes) close();
  }
  close();
}

void GradientReducer::begin() {
  for (Bucket& b : buckets_) {
    b.ready = 0;
    b.launched = false;
    b.work = Work();
  }
  armed_ = true;
}

void GradientReducer::launch(Bucket& b) {
  b.work = group_.all_reduce(b.grads, ReduceOp::sum);
  b.launched = true;
}

void GradientReducer::on_grad_ready(int param) {
  if (!armed_) return;
  Bucket& b = buckets_[static_cast<std::size_t>(bucket_of_[static_cast<std::size_t>(param)])];
  if (++b.ready == b.params) launch(b);
}

void GradientReducer::finish() {
  USTRAIN_ASSERT(armed_, "GradientReducer::finish without begin");
  const auto t0 = std::chrono::steady_clock::now();
  // Buckets never announced complete (none today) go last, in the same order on every rank.
  for (Bucket& b : buckets_)
    if (!b.launched) launch(b);
  for (Bucket& b : buckets_) b.work.wait();
  exposed_seconds_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  armed_ = false;
}

}  // namespace ustrain
