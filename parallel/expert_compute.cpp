#include "parallel/expert_dispatch.h"

namespace ustrain {
namespace {

// `run(expert, begin, end)` over each expert's rows of rows in expert order.
template <class Run>
void each_expert(std::span<const std::int64_t> counts, Run run) {
  std::int64_t at = 0;
  for (std::size_t e = 0; e < counts.size(); ++e) {
    if (counts[e] > 0) run(static_cast<int>(e), at, at + counts[e]);
    at += counts[e];
  }
}

}  // namespace

void ExpertCompute::forward_all(Backend& be, std::span<const std::int64_t> counts, Tensor out, Tensor in) {
  each_expert(counts, [&](int e, std::int64_t b, std::int64_t end) { forward(be, e, out.slice(b, end), in.slice(b, end)); });
}

void ExpertCompute::backward_all(Backend& be, std::span<const std::int64_t> counts, Tensor d_in, Tensor d_out,
                                 Tensor in) {
  each_expert(counts, [&](int e, std::int64_t b, std::int64_t end) {
    backward(be, e, d_in.slice(b, end), d_out.slice(b, end), in.slice(b, end));
  });
}

}  // namespace ustrain
