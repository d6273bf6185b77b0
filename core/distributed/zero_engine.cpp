#include "core/distributed/zero_engine.h"

#include <fmt/format.h>

#include <chrono>

namespace ustrain {
namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

}  // namespace

ZeroEngine::ZeroEngine(ParamStore& params, Backend& backend, Communicator& group, std::size_t bucket_bytes,
                       bool overlap, Communicator* replicate)
    : params_(params),
      backend_(backend),
      group_(group),
      replicate_(replicate != nullptr && replicate->size() > 1 ? replicate : nullptr),
      reduces_(group.size() > 1),
      overlap_(overlap),
      zero_(group.size() > 1 ? params.sharding().zero : 0),
      gathers_compute_copy_(params.shards_masters() && !params.sharding().shards_values()) {
  USTRAIN_ASSERT(params.sharding().parts == group.size() && params.sharding().rank == group.rank(),
                 fmt::format("parameters are sharded as part {} of {} for the group's rank {} of {}", params.sharding().rank,
                             params.sharding().parts, group.rank(), group.size()));
  // (A block of one rank, dp_shard = 1, shards nothing: its whole gradients are its chunks.)
  USTRAIN_ASSERT(replicate_ == nullptr || params.sharding().zero >= 1, "hybrid sharding needs a ZeRO stage");
  const std::size_t units = params.units().size();
  if (reduces_ && zero_ == 0) reducer_ = std::make_unique<GradientReducer>(params, group, bucket_bytes);
  if (params.sharding().shards_values()) value_slots_.resize(ParamStore::kValueSlots);
  if (params.sharding().shards_grads()) grad_slots_.resize(ParamStore::kGradSlots);
  value_slot_of_.assign(units, -1);
  grad_slot_of_.assign(units, -1);
}

ZeroEngine::~ZeroEngine() {
  // Operations in flight own their buffers until they finish; an error here is the one that
  // is already unwinding.
  try {
    for (ValueSlot& s : value_slots_) s.work.wait();
    for (GradSlot& s : grad_slots_) s.work.wait();
    wait_all(pending_);
  } catch (const std::exception&) {
  }
}

Tensor ZeroEngine::slot_part(const Tensor& slot, int unit) const {
  return slot.slice(0, params_.units()[static_cast<std::size_t>(unit)].length);
}

void ZeroEngine::begin_step(int micro_batches) {
  USTRAIN_ASSERT(micro_batches >= 1, "a step has at least one micro-batch");
  micro_batches_ = micro_batches;
  backward_passes_.assign(params_.units().size(), 0);
  if (reducer_) reducer_->begin();  // stage 0: a bucket launches once its units' last backward is done
  backend_.fill(params_.all_grads(), 0.0f);
  exposed_gather_seconds_ = exposed_reduce_seconds_ = 0;
}

// --- Stage 3: values gathered just in time -------------------------------------------------

int ZeroEngine::start_gather(int unit, bool demanded) {
  int victim = -1;
  for (std::size_t i = 0; i < value_slots_.size(); ++i) {
    const ValueSlot& s = value_slots_[i];
    if (s.users > 0 || s.gathering) continue;
    if (victim < 0 || s.unit < 0 || (value_slots_[static_cast<std::size_t>(victim)].unit >= 0 &&
                                     s.last_use < value_slots_[static_cast<std::size_t>(victim)].last_use))
      victim = static_cast<int>(i);
    if (s.unit < 0) break;
  }
  if (victim < 0) {
    USTRAIN_ASSERT(!demanded, "every gathered-layer buffer is in use");
    return -1;  // a prefetch waits for a later chance
  }
  ValueSlot& s = value_slots_[static_cast<std::size_t>(victim)];
  if (s.unit >= 0) value_slot_of_[static_cast<std::size_t>(s.unit)] = -1;
  s.unit = unit;
  s.gathering = true;
  s.work = group_.all_gather(slot_part(params_.value_slot(victim), unit), params_.compute_chunk(unit));
  value_slot_of_[static_cast<std::size_t>(unit)] = victim;
  return victim;
}

void ZeroEngine::drop_gathered() {
  for (ValueSlot& s : value_slots_) {
    s.work.wait();
    USTRAIN_ASSERT(s.users == 0, "a unit is still in use at the optimizer step");
    if (s.unit >= 0) value_slot_of_[static_cast<std::size_t>(s.unit)] = -1;
    s = ValueSlot{};
  }
}

void ZeroEngine::acquire(int unit, bool backward) {
  if (gathers_compute_copy_ && gathered_version_ != params_.values_version()) gather_compute_copy();
  if (!value_slots_.empty()) {
    int index = value_slot_of_[static_cast<std::size_t>(unit)];
    if (index < 0) index = start_gather(unit, /*demanded=*/true);
    ValueSlot& s = value_slots_[static_cast<std::size_t>(index)];
    if (s.gathering) {
      const auto t0 = Clock::now();
      s.work.wait();
      s.gathering = false;
      exposed_gather_seconds_ += seconds_since(t0);
    }
    ++s.users;
    s.last_use = ++clock_;
    params_.bind_unit_values(unit, params_.value_slot(index));
    // Every rank acquires in the same order, so every rank learns the same successors and
    // prefetches the same units. Only within a pass: a backward's last unit is followed by a
    // forward after the optimizer step, which changes the values.
    const Use use{unit, backward};
    if (use_before_last_) next_use_[{*use_before_last_, *last_use_}] = use;
    use_before_last_ = last_use_;
    last_use_ = use;
    if (overlap_ && use_before_last_) {
      const auto next = next_use_.find({*use_before_last_, use});
      if (next != next_use_.end() && next->second.second == backward &&
          value_slot_of_[static_cast<std::size_t>(next->second.first)] < 0)
        start_gather(next->second.first, /*demanded=*/false);
    }
  }
  if (backward && !grad_slots_.empty() && grad_slot_of_[static_cast<std::size_t>(unit)] < 0) {
    const int index = take_grad_slot();
    GradSlot& g = grad_slots_[static_cast<std::size_t>(index)];
    g.unit = unit;
    const Tensor buffer = params_.grad_slot(index);
    backend_.fill(slot_part(buffer, unit), 0.0f);  // gradients accumulate over the backward
    params_.bind_unit_grads(unit, buffer);
    grad_slot_of_[static_cast<std::size_t>(unit)] = index;
  }
}

void ZeroEngine::release(int unit) {
  if (value_slots_.empty()) return;
  const int index = value_slot_of_[static_cast<std::size_t>(unit)];
  USTRAIN_ASSERT(index >= 0 && value_slots_[static_cast<std::size_t>(index)].users > 0, "release without acquire");
  --value_slots_[static_cast<std::size_t>(index)].users;
}

// --- Gradients --------------------------------------------------------------------------------

int ZeroEngine::take_grad_slot() {
  int oldest = -1;
  for (std::size_t i = 0; i < grad_slots_.size(); ++i) {
    const GradSlot& g = grad_slots_[i];
    if (g.unit < 0) return static_cast<int>(i);
    if (g.reducing && (oldest < 0 || g.launched < grad_slots_[static_cast<std::size_t>(oldest)].launched))
      oldest = static_cast<int>(i);
  }
  USTRAIN_ASSERT(oldest >= 0, "every gradient bucket is being written");
  complete(grad_slots_[static_cast<std::size_t>(oldest)]);
  return oldest;
}

void ZeroEngine::complete(GradSlot& g) {
  const auto t0 = Clock::now();
  g.work.wait();
  exposed_reduce_seconds_ += seconds_since(t0);
  // The reduce-scatter left this rank's chunk of the group's sum in the bucket's chunk.
  const std::int64_t c = params_.units()[static_cast<std::size_t>(g.unit)].length / group_.size();
  const auto index = static_cast<std::int64_t>(&g - grad_slots_.data());
  const Tensor part = params_.grad_slot(static_cast<int>(index)).slice(group_.rank() * c, (group_.rank() + 1) * c);
  const Tensor shard = params_.grad_chunk(g.unit);
  backend_.add(shard, shard, part);
  g = GradSlot{};
}

void ZeroEngine::grads_done(int unit) {
  const bool last = ++backward_passes_.at(static_cast<std::size_t>(unit)) == micro_batches_;
  USTRAIN_ASSERT(backward_passes_[static_cast<std::size_t>(unit)] <= micro_batches_,
                 "more backward passes of a unit than micro-batches in the step");
  if (!reduces_) return;
  if (zero_ == 0) {
    if (!last || !overlap_) return;  // without overlap, finish() launches every bucket
    for (int p : params_.units()[static_cast<std::size_t>(unit)].params) reducer_->on_grad_ready(p);
    return;
  }
  if (zero_ == 1) {
    if (!last) return;
    if (overlap_) pending_.push_back(group_.reduce_scatter(params_.grad_chunk(unit), params_.unit_grads(unit)));
    else deferred_.push_back(unit);
    return;
  }
  const int index = grad_slot_of_[static_cast<std::size_t>(unit)];
  USTRAIN_ASSERT(index >= 0, "gradients completed for a unit backward never acquired");
  grad_slot_of_[static_cast<std::size_t>(unit)] = -1;
  GradSlot& g = grad_slots_[static_cast<std::size_t>(index)];
  const Tensor full = slot_part(params_.grad_slot(index), unit);
  const std::int64_t c = full.numel() / group_.size();
  g.work = group_.reduce_scatter(full.slice(group_.rank() * c, (group_.rank() + 1) * c), full);
  g.reducing = true;
  g.launched = ++clock_;
  if (!overlap_) complete(g);
}

void ZeroEngine::finish_backward() {
  const auto t0 = Clock::now();
  if (reducer_) reducer_->finish();
  for (int unit : deferred_) pending_.push_back(group_.reduce_scatter(params_.grad_chunk(unit), params_.unit_grads(unit)));
  deferred_.clear();
  wait_all(pending_);
  pending_.clear();
  exposed_reduce_seconds_ += seconds_since(t0);
  // Complete buckets in launch order; every unit's gradients were announced.
  for (;;) {
    GradSlot* oldest = nullptr;
    for (GradSlot& g : grad_slots_)
      if (g.reducing && (!oldest || g.launched < oldest->launched)) oldest = &g;
    if (!oldest) break;
    complete(*oldest);  // adds its own wait
  }
  if (replicate_) sum_over_replicas();
  if (!reduces_) exposed_reduce_seconds_ = 0;
}

void ZeroEngine::sum_over_replicas() {
  const auto t0 = Clock::now();
  backend_.synchronize();  // the chunks are complete before they leave
  std::vector<Work> sums;
  for (std::size_t u = 0; u < params_.units().size(); ++u)
    if (params_.units()[u].length > 0) sums.push_back(replicate_->all_reduce(params_.grad_chunk(static_cast<int>(u))));
  wait_all(sums);
  exposed_reduce_seconds_ += seconds_since(t0);
}

void ZeroEngine::optimizer_step(Optimizer& optimizer, const OptimizerStep& s) {
  optimizer.update(params_, group_, s);
  if (params_.sharding().shards_values()) {
    drop_gathered();  // the next forward gathers the new values
    return;
  }
  if (params_.sharding().shards_optimizer()) gather_compute_copy();
}

void ZeroEngine::gather_compute_copy() {
  backend_.synchronize();  // the chunks are written before they leave
  std::vector<Work> gathers;
  for (std::size_t u = 0; u < params_.units().size(); ++u) {
    const int unit = static_cast<int>(u);
    if (params_.units()[u].length == 0) continue;
    gathers.push_back(group_.all_gather(params_.unit_compute_values(unit), params_.compute_chunk(unit)));
  }
  wait_all(gathers);
  gathered_version_ = params_.values_version();
}

}  // namespace ustrain
