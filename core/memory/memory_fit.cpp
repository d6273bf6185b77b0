#include "core/memory/memory_fit.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <cmath>

#include "core/checkpoint/writer.h"
#include "core/distributed/pipeline_plan.h"
#include "core/trace/trace_memory.h"
#include "core/train/model_instance.h"
#include "core/train/optimizer_choice.h"
#include "core/memory/model_size.h"
#include "kernels/error.h"

namespace ustrain {
namespace {

// " x 4 processes on this host = 12 GiB" when the memory is shared.
std::string shared_by(int sharers, long double bytes, const std::string& memory_name) {
  if (sharers <= 1) return "";
  const long double all = bytes * static_cast<long double>(sharers);
  return fmt::format(" x {} processes on {} = {}", sharers, memory_name, describe_bytes(all));
}

// A fit within 10% leaves too little for what no plan counts (code, libraries, the dataset's
// pages, BLAS buffers): said before the run, so a kill by the kernel later is explained.
void warn_if_tight(long double need, std::size_t available, const std::string& what, const std::string& memory_name) {
  if (need <= 0.9L * static_cast<long double>(available)) return;
  spdlog::warn("{} need {}, within 10% of the {} available on {}; the process may be killed for memory once it "
               "runs: lower train.micro_batch or train.seq_len, or set train.recompute",
               what, describe_bytes(need), format_bytes(available), memory_name);
}

// Refuses with `message`, or under device.memory_check = "warn" says it and goes on.
void too_small(MemoryCheck check, const std::string& message) {
  if (check == MemoryCheck::warn) {
    spdlog::warn("{}; running anyway as device.memory_check = \"warn\" asks: the process may be killed for memory",
                 message);
    return;
  }
  throw UserError(message + "; if more memory is free than reported (page cache the kernel can reclaim), set "
                            "device.memory_check = \"warn\" to run anyway");
}

}  // namespace

MemoryCheck memory_check_of(const Recipe& recipe) {
  return recipe.device.memory_check == "warn" ? MemoryCheck::warn : MemoryCheck::refuse;
}

MemoryShare memory_share(Device device, std::size_t host_available_at_start, int local_ranks) {
  if (device == Device::cpu) return {host_available_at_start, std::max(local_ranks, 1)};
  return {};
}

void check_state_fits(const Recipe& recipe, std::size_t available, int sharers, const std::string& memory_name) {
  if (available == 0) return;
  const ModelSize size = model_size(recipe);
  const long double need = size.state_bytes_per_rank * static_cast<long double>(std::max(sharers, 1));
  if (need <= static_cast<long double>(available))
    return warn_if_tight(need, available, "the training state's weights, gradients and optimizer moments",
                         memory_name);
  too_small(memory_check_of(recipe), fmt::format(
      "the model does not fit: {} layers, d_model {}, ffn_hidden {}, vocabulary {} make {}; one rank holds at least "
      "{} of it (split over parallel.tp = {}{}{}){}, but {} has {} available; use a smaller model, or spread it "
      "over more ranks (parallel.tp, parallel.pp, or parallel.zero with parallel.dp > 1)",
      recipe.model.n_layers, recipe.model.d_model, recipe.model.ffn_hidden, recipe.model.vocab_size,
      describe_state_bytes(size), describe_bytes(size.state_bytes_per_rank), recipe.parallel.tp,
      recipe.parallel.pp > 1 ? fmt::format(", the layers over parallel.pp = {}", recipe.parallel.pp) : std::string(),
      recipe.parallel.zero > 0
          ? fmt::format(" and ZeRO stage {} over {} data-parallel ranks", recipe.parallel.zero,
                        recipe.parallel.shard_dp())
          : std::string(),
      shared_by(sharers, size.state_bytes_per_rank, memory_name), memory_name, format_bytes(available)));
}

void check_plan_fits(const MemoryPlan& plan, std::size_t available, int sharers, const std::string& memory_name,
                     MemoryCheck check, std::size_t beside, bool host_memory) {
  if (available == 0) return;
  if (!host_memory) beside = 0;
  const std::size_t host = host_memory ? plan.host_bytes() : 0;
  std::size_t total = 0;
  if (__builtin_add_overflow(plan.total_bytes(), host + beside, &total))
    throw UserError("the memory plan's buffers together overflow 64-bit byte counts; use a smaller model or "
                    "micro-batch");
  const long double need = static_cast<long double>(total) * static_cast<long double>(std::max(sharers, 1));
  if (need <= static_cast<long double>(available))
    return warn_if_tight(need, available, "the memory plan's buffers", memory_name);
  std::string parts;
  for (int c = 0; c < kMemCategories; ++c) {
    const auto category = static_cast<MemCategory>(c);
    if (plan.bytes(category) == 0) continue;
    parts += fmt::format("{}{} {}", parts.empty() ? "" : ", ", mem_category_name(category),
                         format_bytes(plan.bytes(category)));
  }
  if (host_memory)
    for (const HostBuffer& b : plan.host_buffers())
      if (b.bytes > 0) parts += fmt::format(", {} {}", b.name, format_bytes(b.bytes));
  if (beside > 0) parts += fmt::format(", data batches {}", format_bytes(beside));
  too_small(check, fmt::format(
      "the memory plan needs {} per process ({}){}, but {} has {} available; lower train.micro_batch or "
      "train.seq_len, set train.recompute = \"selective\" or \"full\", spread the model over more ranks "
      "(parallel.tp, parallel.pp, or parallel.zero with parallel.dp > 1), long sequences over more ranks "
      "(parallel.cp) or use a smaller model (`ustrain train --dry-run` prints the plan)",
      format_bytes(total), parts, shared_by(sharers, static_cast<long double>(total), memory_name), memory_name,
      format_bytes(available)));
}

void check_host_buffers_fit(const MemoryPlan& plan, std::size_t available, int sharers, MemoryCheck check,
                            std::size_t beside) {
  MemoryPlan host_only;
  for (const HostBuffer& b : plan.host_buffers()) host_only.add_host(b.name, b.bytes);
  check_plan_fits(host_only, available, sharers, "this host", check, beside);
}

long double data_batch_bytes(const Recipe& r) {
  const long double per_token = r.train.document_mask ? 12.0L : 8.0L;  // int32 ids, targets (and document ids)
  const long double batch =
      per_token * static_cast<long double>(r.train.micro_batch) * static_cast<long double>(r.train.seq_len);
  return 2.0L * static_cast<long double>(r.data.prefetch + 1) * batch;
}

void check_host_fits(const Recipe& recipe, std::size_t available, int sharers, bool saves_checkpoints) {
  if (available == 0) return;
  const long double data = data_batch_bytes(recipe);
  if (data * static_cast<long double>(std::max(sharers, 1)) > static_cast<long double>(available))
    too_small(memory_check_of(recipe), fmt::format(
        "the data loader's micro-batches alone need {} per process{} (train.micro_batch = {} sequences of "
        "train.seq_len = {} tokens, inputs and targets{}, {} batches ahead for training and for validation), but this "
        "host has {} available; lower train.micro_batch, train.seq_len or data.prefetch",
        describe_bytes(data),
        shared_by(sharers, data, "this host"), recipe.train.micro_batch, recipe.train.seq_len,
        recipe.train.document_mask ? " and document ids" : "", recipe.data.prefetch + 1,
        format_bytes(available)));
  if (recipe.device.type != "cpu") return;  // the model's memory is the GPU's (checked when it is made)
  check_state_fits(recipe, available, sharers, "this host");
  const ParallelSection& p = recipe.parallel;
  ModelGeometry geometry = ModelGeometry::of(
      recipe.model,
      ModelSplit{static_cast<int>(p.tp), 0, p.sp, static_cast<int>(p.pp), 0, static_cast<int>(p.virtual_stages),
                 static_cast<int>(p.cp), 0, static_cast<int>(p.ep), 0, p.ep_capacity_factor},
      recipe.train.seq_len);
  geometry.documents = recipe.train.document_mask;
  LlamaModel model(recipe.model, geometry, recipe.train.micro_batch, parse_recompute(recipe.train.recompute),
                   compute_dtype(recipe));
  MemoryPlan plan;
  const auto zero = static_cast<int>(p.zero);
  plan_model(model, plan,
             ParamShardings{ParamSharding{static_cast<int>(p.shard_dp() * p.cp), 0, zero},
                            ParamSharding{static_cast<int>(p.dp * p.cp / p.ep), 0, zero}},
             plan_pipeline(recipe, 0).slots);
  plan_optimizer(recipe, model.params(), plan);
  if (saves_checkpoints) plan_checkpoint_snapshot(model.params(), plan);
  plan_trace(recipe, plan);
  check_plan_fits(plan, available, sharers, "this host", memory_check_of(recipe), static_cast<std::size_t>(data));
}

}  // namespace ustrain
