#include "core/recipe/model_size.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "core/recipe/geometry.h"

namespace ustrain {
namespace {

// Beyond any machine, and far enough below 2^64 that sums of the plan's entries cannot wrap.
constexpr long double kMaxPlanBytes = 1152921504606846976.0L;  // 2^60

// 1.23e+15 for huge values, the integer below a million.
std::string count(long double v) {
  return v < 1e6L ? fmt::format("{}", static_cast<std::int64_t>(v)) : fmt::format("{:.3g}", static_cast<double>(v));
}

// The sizes of pipeline rank `pp_rank` of the recipe's layout at their whole width: tensor
// parallelism only divides them, which model_size() does without padding the vocabulary.
ModelGeometry whole_width_geometry(const Recipe& r, int pp_rank) {
  ModelSection m = r.model;
  m.vocab_size = std::max<std::int64_t>(m.vocab_size, 1);
  const ParallelSection& p = r.parallel;
  return ModelGeometry::of(m, ModelSplit{1, 0, false, static_cast<int>(p.pp), pp_rank, static_cast<int>(p.virtual_stages)});
}

}  // namespace

ModelSize model_size(const Recipe& r) {
  using F = long double;
  const ModelGeometry g = whole_width_geometry(r, 0);
  ModelSize s;
  s.parameters = g.total_params<F>();

  const F tp = static_cast<F>(r.parallel.tp);
  // ZeRO's shard group: dp x cp, or dp_shard x cp under hybrid sharding.
  const F parts = static_cast<F>(std::max<std::int64_t>(r.parallel.shard_dp(), 1) * r.parallel.cp);
  const std::int64_t zero = r.parallel.zero;
  // In mixed precision the fp32 masters are sharded with the moments, beside a 16-bit compute
  // copy sharded with the values (core/model/param_store.h).
  const bool mixed = r.train.precision != "fp32";
  const F compute_copy = mixed ? 2 / (zero >= 3 ? parts : 1) : 0;
  const F weights = 4 / (zero >= 3 || (mixed && zero >= 1) ? parts : 1) + compute_copy;
  const F grads = 4 / (zero >= 2 ? parts : 1);
  const F moments = 8 / (zero >= 1 ? parts : 1);
  // The least any pipeline rank holds: its layers, and the vocabulary matrices on the first
  // and last stages.
  F stage_parameters = s.parameters;
  for (int rank = 0; rank < r.parallel.pp; ++rank)
    stage_parameters = std::min(stage_parameters, whole_width_geometry(r, rank).held_params<F>());
  s.state_bytes_per_rank = stage_parameters / tp * (weights + grads + moments);

  // Per token and layer: the residual stream, norm outputs, attention output and MLP input (d
  // each), q/k/v and the MLP's gate, up and activation; then the logits and their gradient.
  const F tokens = static_cast<F>(r.train.micro_batch) * static_cast<F>(r.train.seq_len);
  const F d = static_cast<F>(g.d_model), f = static_cast<F>(g.ffn), v = static_cast<F>(g.vocab);
  s.activation_bytes = 4 * tokens * (static_cast<F>(g.n_layers) * (4 * d + g.qkv_width<F>() + 3 * f) + 2 * v);
  return s;
}

std::optional<std::string> model_size_problem(const Recipe& r) {
  const ModelSize s = model_size(r);
  const long double total = s.parameters * 16 + s.activation_bytes;
  if (total <= kMaxPlanBytes) return std::nullopt;
  return fmt::format(
      "a model of {} layers, d_model {}, ffn_hidden {} and a vocabulary of {} has {} parameters; its training state "
      "({}) and the activations of a micro-batch of {} x {} tokens ({}) need {}, more than any machine has (the "
      "memory plan counts bytes up to 2^60 = {}); use a smaller model or micro-batch",
      r.model.n_layers, r.model.d_model, r.model.ffn_hidden, std::max<std::int64_t>(r.model.vocab_size, 1),
      count(s.parameters), describe_state_bytes(s), r.train.micro_batch, r.train.seq_len,
      describe_bytes(s.activation_bytes), describe_bytes(total),
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
