// The parameters of a model on this rank: the registry of what the model declared and where
// this rank's part of each lives (core/model/param_registry.h), and one store per gradient-sync
// group holding the training state of that group's parameters (core/model/param_store.h).
//
// Everything that treats the training state as a whole (initialisation, checkpoints, the
// gradient norm, the optimizer) goes through here and so iterates over every store; what is
// done per sync group (ZeRO, the gradient reduction) takes one store at a time.
#pragma once

#include <memory>
#include <vector>

#include "core/model/param_registry.h"
#include "core/model/param_store.h"

namespace ustrain {

// How each sync group's store is sharded (over that group's ranks).
struct ParamShardings {
  ParamSharding dense;    // over the dense gradient group (dp x cp)
  ParamSharding experts;  // over the expert-gradient group
  ParamShardings() = default;
  ParamShardings(ParamSharding dense_sharding) : dense(dense_sharding) {}  // NOLINT: a dense-only model
  ParamShardings(ParamSharding dense_sharding, ParamSharding expert_sharding)
      : dense(dense_sharding), experts(expert_sharding) {}
  const ParamSharding& of(SyncGroup g) const { return g == SyncGroup::dense ? dense : experts; }
};

class ModelParams {
 public:
  ModelParams() = default;
  ModelParams(const ModelParams&) = delete;
  ModelParams& operator=(const ModelParams&) = delete;

  ParamRegistry& registry() { return registry_; }
  const ParamRegistry& registry() const { return registry_; }
  // The registry's questions, asked of the model's parameters.
  const ParamViews& operator[](int handle) const { return registry_[handle]; }
  const std::vector<ParamSpec>& specs() const { return registry_.specs(); }
  const ParamSpec& spec(int handle) const { return registry_.spec(handle); }
  std::vector<ParamDecl> whole_model() const { return registry_.whole_model(); }
  std::int64_t count() const { return registry_.count(); }

  // One store per sync group this rank holds parameters of (the dense one first), each
  // planned with its group's sharding.
  void plan(MemoryPlan& plan, const ParamShardings& sharding = {}, DType compute = DType::f32);
  void bind(const PlannedMemory& mem);
  DType compute_dtype() const { return compute_; }

  const std::vector<std::unique_ptr<ParamStore>>& stores() const { return stores_; }
  // The store of group g, or null when this rank holds none of its parameters.
  ParamStore* store(SyncGroup g) const;
  ParamStore& dense() const;
  // The store holding unit `id` and its number there; {nullptr, -1} when no store holds it.
  std::pair<ParamStore*, int> find_unit(UnitId id) const;
  std::int64_t flat_size() const;  // Psi of every store, padding included

  // ParamStore's pieces of every store, dense first (see there).
  std::vector<ParamPiece> held(ParamState state) const;
  std::vector<ParamPiece> owned(ParamState state) const;
  std::vector<ParamPiece> updated_grads() const;
  void initialise(Backend& backend, std::uint64_t seed) const;
  void refresh_compute_copy(Backend& backend) const;

 private:
  ParamRegistry registry_;
  std::vector<std::unique_ptr<ParamStore>> stores_;
  DType compute_ = DType::f32;
};

}  // namespace ustrain
