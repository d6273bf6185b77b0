#include "core/model/params.h"

namespace ustrain {

void ModelParams::plan(MemoryPlan& plan, const ParamShardings& sharding, DType compute) {
  compute_ = compute;
  stores_.clear();
  for (SyncGroup g : {SyncGroup::dense, SyncGroup::experts}) {
    if (g != SyncGroup::dense && !registry_.has(g)) continue;
    stores_.push_back(std::make_unique<ParamStore>(registry_, g));
    stores_.back()->plan(plan, sharding.of(g), compute);
  }
}

void ModelParams::bind(const PlannedMemory& mem) {
  for (const auto& s : stores_) s->bind(mem);
}

ParamStore* ModelParams::store(SyncGroup g) const {
  for (const auto& s : stores_)
    if (s->group() == g) return s.get();
  return nullptr;
}

ParamStore& ModelParams::dense() const {
  ParamStore* s = store(SyncGroup::dense);
  USTRAIN_ASSERT(s != nullptr, "parameters used before they are planned");
  return *s;
}

std::pair<ParamStore*, int> ModelParams::find_unit(UnitId id) const {
  for (const auto& s : stores_)
    if (const int u = s->unit_index(id); u >= 0) return {s.get(), u};
  return {nullptr, -1};
}

std::int64_t ModelParams::flat_size() const {
  std::int64_t n = 0;
  for (const auto& s : stores_) n += s->flat_size();
  return n;
}

// The pieces `of` gives for each store, the stores in order.
template <typename Of>
static std::vector<ParamPiece> concatenated(const std::vector<std::unique_ptr<ParamStore>>& stores, Of of) {
  std::vector<ParamPiece> out;
  for (const auto& s : stores) {
    std::vector<ParamPiece> p = of(*s);
    out.insert(out.end(), p.begin(), p.end());
  }
  return out;
}

std::vector<ParamPiece> ModelParams::held(ParamState state) const {
  return concatenated(stores_, [&](const ParamStore& s) { return s.held(state); });
}
std::vector<ParamPiece> ModelParams::owned(ParamState state) const {
  return concatenated(stores_, [&](const ParamStore& s) { return s.owned(state); });
}
std::vector<ParamPiece> ModelParams::updated_grads() const {
  return concatenated(stores_, [](const ParamStore& s) { return s.updated_grads(); });
}

void ModelParams::initialise(Backend& backend, std::uint64_t seed) const {
  for (const auto& s : stores_) s->initialise(backend, seed);
}

void ModelParams::refresh_compute_copy(Backend& backend) const {
  for (const auto& s : stores_) s->refresh_compute_copy(backend);
}

}  // namespace ustrain
