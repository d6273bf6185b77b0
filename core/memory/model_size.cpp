#include "core/memory/model_size.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace ustrain {
namespace {

// Beyond any machine, and far enough below 2^64 that sums of the plan's entries cannot wrap.
constexpr long double kMaxPlanBytes = 1152921504606846976.0L;  // 2^60

// 1.23e+15 for huge values, the integer below a million.
std::string count(long double v) {
  return v < 1e6L ? fmt::format("{}", static_cast<std::int64_t>(v)) : fmt::format("{:.3g}", static_cast<double>(v));
}

}  // namespace

ModelSize model_size(const Recipe& r) {
  const ModelSection& m = r.model;
  using F = long double;
  const F v = static_cast<F>(std::max<std::int64_t>(m.vocab_size, 1)), d = static_cast<F>(m.d_model);
  const F layers = static_cast<F>(m.n_layers), f = static_cast<F>(m.ffn_hidden);
  const F kv_width = static_cast<F>(m.n_kv_heads) * static_cast<F>(r.head_dim());
  // q and o (d x d each), k and v (kv_width x d each), gate, up and down (f x d each), two norms.
  const F per_layer = 2 * d * d + 2 * kv_width * d + 3 * f * d + 2 * d;
  ModelSize s;
  s.parameters = v * d * (m.tied_embeddings ? 1 : 2) + d + layers * per_layer;

  const F tp = static_cast<F>(r.parallel.tp);
  const F parts = static_cast<F>(std::max<std::int64_t>(r.parallel.dp, 1) * r.parallel.cp);
  const std::int64_t zero = r.parallel.zero;
  const F weights = 4 / (zero >= 3 ? parts : 1), grads = 4 / (zero >= 2 ? parts : 1);
  const F moments = 8 / (zero >= 1 ? parts : 1);
  // A pipeline stage holds its layers, and at most two stages the vocabulary matrices (one
  // each): the least any stage holds.
  const F pp = static_cast<F>(r.parallel.pp);
  const F stage_parameters =
      r.parallel.pp == 1 ? s.parameters : layers / pp * per_layer + (r.parallel.pp == 2 ? v * d : 0);
  s.state_bytes_per_rank = stage_parameters / tp * (weights + grads + moments);

  // Per token and layer: the residual stream, norm outputs, attention output and MLP input (d
  // each), q/k/v and the MLP's gate, up and activation; then the logits and their gradient.
  const F tokens = static_cast<F>(r.train.micro_batch) * static_cast<F>(r.train.seq_len);
  const F qkv = d + 2 * kv_width;
  s.activation_bytes = 4 * tokens * (layers * (4 * d + qkv + 3 * f) / tp + 2 * v / tp);
  return s;
}

std::optional<std::string> model_size_problem(const Recipe& r) {
  const ModelSize s = model_size(r);
  const long double total = s.parameters * 16 + s.activation_bytes * static_cast<long double>(r.parallel.tp);
  if (total <= kMaxPlanBytes) return std::nullopt;
  return fmt::format(
      "a model of {} layers, d_model {}, ffn_hidden {} and a vocabulary of {} has {} parameters; its training state "
      "({}) and the activations of a micro-batch of {} x {} tokens ({}) need {}, more than any machine has (the "
      "memory plan counts bytes up to 2^60 = {}); use a smaller model or micro-batch",
      r.model.n_layers, r.model.d_model, r.model.ffn_hidden, std::max<std::int64_t>(r.model.vocab_size, 1),
      count(s.parameters), describe_state_bytes(s), r.train.micro_batch, r.train.seq_len,
      describe_bytes(s.activation_bytes * static_cast<long double>(r.parallel.tp)), describe_bytes(total),
      describe_bytes(kMaxPlanBytes));
}

std::string describe_state_bytes(const ModelSize& size) {
  return fmt::format("{} parameters x 16 bytes = {}", count(size.parameters), describe_bytes(size.parameters * 16));
}

std::string describe_bytes(long double bytes) {
  static constexpr const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB", "ZiB", "YiB"};
  int unit = 0;
  while (bytes >= 1024.0L && unit < 8) {
    bytes /= 1024.0L;
    ++unit;
  }
  if (unit == 0) return fmt::format("{} B", static_cast<std::int64_t>(bytes));
  return fmt::format("{:.{}f} {}", static_cast<double>(bytes), unit == 1 ? 1 : 2, kUnits[unit]);
}

}  // namespace ustrain
