#include "core/distributed/param_engines.h"

namespace ustrain {

ParamEngines::ParamEngines(ModelParams& params, Backend& backend, const GroupOf& group_of, std::size_t bucket_bytes,
                           bool overlap)
    : ParamEngines(params, backend, group_of, [](SyncGroup) -> Communicator* { return nullptr; }, bucket_bytes,
                   overlap) {}

ParamEngines::ParamEngines(ModelParams& params, Backend& backend, const GroupOf& group_of,
                           const ReplicateOf& replicate_of, std::size_t bucket_bytes, bool overlap)
    : params_(params) {
  for (const auto& store : params.stores())
    engines_.push_back(std::make_unique<ZeroEngine>(*store, backend, group_of(store->group()), bucket_bytes, overlap,
                                                    replicate_of(store->group())));
}

std::pair<ZeroEngine*, int> ParamEngines::engine_of(UnitId unit) {
  for (std::size_t i = 0; i < engines_.size(); ++i)
    if (const int u = params_.stores()[i]->unit_index(unit); u >= 0) return {engines_[i].get(), u};
  USTRAIN_ASSERT(false, "the model used a unit no store holds: " + unit.str());
  return {nullptr, -1};
}

void ParamEngines::begin_step(int micro_batches) {
  for (auto& e : engines_) e->begin_step(micro_batches);
}
void ParamEngines::finish_backward() {
  for (auto& e : engines_) e->finish_backward();
}
void ParamEngines::optimizer_step(Optimizer& optimizer, const OptimizerStep& s) {
  for (auto& e : engines_) e->optimizer_step(optimizer, s);
}

double ParamEngines::exposed_reduce_seconds() const {
  double s = 0;
  for (const auto& e : engines_) s += e->exposed_reduce_seconds();
  return s;
}
double ParamEngines::exposed_gather_seconds() const {
  double s = 0;
  for (const auto& e : engines_) s += e->exposed_gather_seconds();
  return s;
}

void ParamEngines::acquire(UnitId unit, bool backward) {
  const auto [engine, u] = engine_of(unit);
  engine->acquire(u, backward);
}
void ParamEngines::release(UnitId unit) {
  const auto [engine, u] = engine_of(unit);
  engine->release(u);
}
void ParamEngines::grads_done(UnitId unit) {
  const auto [engine, u] = engine_of(unit);
  engine->grads_done(u);
}

}  // namespace ustrain
