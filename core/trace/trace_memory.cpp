#include "core/trace/trace_memory.h"

#include <algorithm>

#include "core/recipe/step_range.h"

namespace ustrain {
namespace {

// Measured on traced runs (2026-11): a span takes about 200 bytes in memory (the event, its
// name and arguments) and about 140 bytes of JSON; the writer peaks at about 12 times the JSON.
constexpr std::uint64_t kSpanMemoryBytes = 256;
constexpr std::uint64_t kSpanJsonBytes = 160;
constexpr std::uint64_t kWriterPeakFactor = 12;

}  // namespace

std::int64_t trace_spans_per_step(const Recipe& recipe) {
  const ParallelSection& p = recipe.parallel;
  const std::int64_t dp = std::max<std::int64_t>(p.dp, 1);
  const std::int64_t micro_batches =
      std::max<std::int64_t>(recipe.train.global_batch / std::max<std::int64_t>(recipe.train.micro_batch * dp, 1), 1);
  const std::int64_t layers = recipe.model.n_layers;
  // Per micro-batch and layer: its forward, backward and recomputation spans and up to eight
  // tensor-parallel collectives; per micro-batch a few more (embedding, head, pipeline
  // transfers); per step and layer the gradient and ZeRO collectives; and the step's own.
  return micro_batches * (layers * 12 + 16) + layers * 8 + 64;
}

std::uint64_t trace_host_bytes(const Recipe& recipe) {
  const std::optional<StepRange> range = parse_step_range(recipe.log.trace_steps);
  if (!range) return 0;
  const auto steps = static_cast<std::uint64_t>(range->last - range->first + 1);
  const auto spans = steps * static_cast<std::uint64_t>(trace_spans_per_step(recipe));
  const ParallelSection& p = recipe.parallel;
  const auto ranks = static_cast<std::uint64_t>(std::max<std::int64_t>(p.dp, 1) * p.tp * p.pp * p.cp);
  // This rank's spans and its writer's peak, plus every rank's JSON document on the leader.
  return spans * (kSpanMemoryBytes + kWriterPeakFactor * kSpanJsonBytes) + ranks * spans * kSpanJsonBytes;
}

void plan_trace(const Recipe& recipe, MemoryPlan& plan) {
  const std::uint64_t bytes = trace_host_bytes(recipe);
  if (bytes > 0) plan.add_host(kTraceBuffers, bytes);
}

}  // namespace ustrain
