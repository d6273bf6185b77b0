// The storage of one gradient-sync group's parameters (core/model/param_registry.h): values,
// gradients and AdamW moments laid out by the memory plan, sharded by ZeRO over the group.
//
// The store lays its parameters out in one flat index space, unit after unit (in UnitId
// order); inside a unit the weight-decayed parameters come first, then the others (norm
// gains); a parameter declared `packed` follows the previous one with no padding, so q/k/v
// (or gate/up) form one matrix for one fused GEMM. Each unit is padded to a multiple of
// (ranks x 64) floats so that it splits into equal, aligned chunks, one per rank of the
// group: chunk r of every unit is rank r's shard. Units are numbered 0.. in the store.
//
// What is stored depends on the ZeRO stage (ParamSharding::zero), per rank, Psi = the flat
// size:                 values      gradients   AdamW m and v
//   stage 0             Psi         Psi         2 Psi
//   stage 1             Psi         Psi         2 Psi / N
//   stage 2             Psi         Psi / N     2 Psi / N     (+ gradient buckets)
//   stage 3             Psi / N     Psi / N     2 Psi / N     (+ gathered layers)
// In mixed precision the model computes with a copy of the values in its compute dtype (bf16
// or fp16: Psi 16-bit elements, Psi / N at stage 3); the stored fp32 values are the master
// weights that the optimizer updates and checkpoints hold, sharded with the optimizer state
// from stage 1 on (Psi / N). The optimizer writes its part of the copy as it updates the
// masters, and the data-parallel engine all-gathers the copy (stages 1, 2) or its units as the
// model uses them (stage 3), in the compute dtype.
// With sharded values or gradients, a unit's value and gradient views point into
// communication buffers that a data-parallel engine binds while the unit is in use
// (bind_unit_values, bind_unit_grads); the model reads the views at each call.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/memory/memory_plan.h"
#include "core/model/param_registry.h"

namespace ustrain {

// How a store's training state is split over the ranks of its sync group.
struct ParamSharding {
  int parts = 1;  // ranks of the group
  int rank = 0;   // this rank among them
  int zero = 0;   // ZeRO stage, 0..3
  // Under hybrid sharding, this rank's place among the ranks that hold the same shard
  // (parallel/mesh.h); only the first owns it (saves it, counts it in the gradient norm).
  int replica = 0;
  bool shards_optimizer() const { return zero >= 1 && parts > 1; }
  bool shards_grads() const { return zero >= 2 && parts > 1; }
  bool shards_values() const { return zero >= 3 && parts > 1; }
  // The stored (master) values: sharded with the values, or in mixed precision with the
  // optimizer state (the model then computes with its own copy).
  bool shards_masters(DType compute) const { return shards_values() || (compute != DType::f32 && shards_optimizer()); }
};

// A unit's place in the flat index space.
struct ParamUnit {
  UnitId id;
  std::int64_t begin = 0;       // first float
  std::int64_t length = 0;      // floats, a multiple of parts x 64
  std::int64_t decay_end = 0;   // [begin, decay_end) holds the weight-decayed parameters
  std::int64_t shard_begin = 0; // where this unit's chunk starts in a rank's shard
  std::vector<int> params;      // registry handles, in layout order
};

enum class ParamState { value, adam_m, adam_v, grad };

// Part of one parameter in some storage: elements [begin, end) of the flattened (row-major)
// parameter, held contiguously by `data`.
struct ParamPiece {
  int param = 0;  // registry handle
  std::int64_t begin = 0, end = 0;
  Tensor data;  // (end - begin) floats
};

// One contiguous range the optimizer updates with one AdamW call.
struct OptimizerSegment {
  bool decay = true;
  Tensor value, grad, m, v;
  // The same range of the compute copy, where the store has one: the update rewrites it in
  // the same pass.
  Tensor compute_copy;
};

// One parameter's part of the ranges the optimizer updates on this rank: the segments split
// at parameter bounds, padding left out. Elements [begin, end) of the flattened parameter.
struct OptimizerPiece {
  int param = 0;  // registry handle
  std::int64_t begin = 0, end = 0;
  Tensor value, grad, m, v;
  Tensor compute_copy;  // as OptimizerSegment::compute_copy
};

class ParamStore {
 public:
  // The parameters of `registry` in `group` (declared and placed before plan()).
  ParamStore(ParamRegistry& registry, SyncGroup group) : registry_(registry), group_(group) {}
  ParamStore(const ParamStore&) = delete;
  ParamStore& operator=(const ParamStore&) = delete;

  SyncGroup group() const { return group_; }
  const ParamRegistry& registry() const { return registry_; }
  // Adds values, gradients, moments, the compute copy (when `compute` is not f32) and (for
  // sharded stages) communication buffers to the plan.
  void plan(MemoryPlan& plan, ParamSharding sharding = {}, DType compute = DType::f32);
  void bind(const PlannedMemory& mem);
  DType compute_dtype() const { return compute_; }
  bool shards_masters() const { return sharding_.shards_masters(compute_); }
  // After the stored values change (initialise, load): rewrites the compute copy from them
  // (with sharded masters at stages 1 and 2, this rank's chunks of it: the engine gathers the
  // rest before the next use) and advances values_version(). Does nothing in fp32.
  void refresh_compute_copy(Backend& backend) const;
  // Counts the refreshes, so that an engine knows when the copy needs gathering.
  std::uint64_t values_version() const { return values_version_; }

  const ParamSharding& sharding() const { return sharding_; }
  const std::vector<ParamUnit>& units() const { return units_; }
  // The store's number for unit `id`, or -1 when it holds no parameter of it.
  int unit_index(UnitId id) const;
  std::int64_t flat_size() const { return flat_size_; }    // Psi, padding included
  std::int64_t shard_size() const { return flat_size_ / sharding_.parts; }
  std::int64_t largest_unit() const;                       // floats

  // Gradient storage between steps: the whole flat gradient, or this rank's shard of it
  // (stages 2 and 3). Padding is zero.
  Tensor all_grads() const { return grads_; }
  // Stored values: the whole flat index space, or this rank's shard (shards_masters()).
  Tensor all_values() const { return values_; }
  // Unit u's range of the whole values / gradients (stages that store them whole).
  Tensor unit_values(int u) const;
  Tensor unit_grads(int u) const;
  // What the model computes with (the compute copy, or in fp32 the values): unit u's range of
  // it (stages 0-2, where it is whole), and this rank's chunk of unit u in it, what the
  // all-gathers of stages 1-3 send.
  Tensor unit_compute_values(int u) const;
  Tensor compute_chunk(int u) const;
  // What every rank of the group holds the same between steps: the stored values, or, with
  // masters sharded at stages 1 and 2, the gathered compute copy; empty at stage 3.
  Tensor replicated_values() const;
  // This rank's chunk of unit u in the stored values / gradients / moments (whole or shard).
  Tensor chunk_of(ParamState state, int u) const;
  Tensor grad_chunk(int u) const;

  // Points the views of unit u's parameters into `unit_buffer` (ParamUnit::length elements: the
  // compute dtype's for values, floats for gradients), laid out like the flat index space. For
  // sharded values (stage 3) and gradients (2, 3).
  void bind_unit_values(int u, const Tensor& unit_buffer);
  void bind_unit_grads(int u, const Tensor& unit_buffer);
  // Communication buffers planned for the sharded stages: `slots` buffers of largest_unit()
  // elements (values in the compute dtype, gradients in fp32).
  Tensor value_slot(int i) const;
  Tensor grad_slot(int i) const;
  static constexpr int kValueSlots = 3;  // two layers in use (a tied head) plus one prefetched
  static constexpr int kGradSlots = 3;   // two being reduced plus one being written

  // What this rank keeps of one state between steps (whole parameters, or its chunks):
  // what initialisation and loading fill.
  std::vector<ParamPiece> held(ParamState state) const;
  // This rank's chunk of every parameter it owns (whole ones in a group of one rank): what it
  // saves and counts in the gradient norm. The ranks' chunks together cover every parameter
  // once (under hybrid sharding, the first replica's; the others own none). Pieces never
  // cover padding.
  std::vector<ParamPiece> owned(ParamState state) const;
  // The gradients this rank's optimizer reads after the reduction: whole parameters (stage
  // 0) or its chunks.
  std::vector<ParamPiece> updated_grads() const;
  // The ranges AdamW updates on this rank: every unit (stage 0) or this rank's chunks.
  std::vector<OptimizerSegment> optimizer_segments() const;
  // The same ranges, one piece per parameter.
  std::vector<OptimizerPiece> optimizer_pieces() const;
  // Elements [first, second) of parameter `param` (flattened) that rank `rank` of the group
  // updates; first == second when none.
  std::pair<std::int64_t, std::int64_t> update_range(int param, int rank) const;

  // Deterministic initialisation from the seed: each element depends only on (seed, name,
  // index in the global tensor), never on the layout, sharding or thread count.
  void initialise(Backend& backend, std::uint64_t seed) const;

 private:
  Tensor stored(ParamState state) const;
  Tensor computed() const { return compute_copy_.empty() ? values_ : compute_copy_; }
  bool whole(ParamState state) const;
  std::vector<ParamPiece> pieces(ParamState state, bool chunk_only, bool owned_only) const;
  void point_unit(int u, const Tensor& buffer, bool values);
  std::string plan_name(const std::string& what) const;

  ParamRegistry& registry_;
  SyncGroup group_;
  std::vector<std::int64_t> offset_;  // per registry handle: first float in the flat index space
  std::vector<ParamUnit> units_;
  std::int64_t flat_size_ = 0;
  ParamSharding sharding_;
  DType compute_ = DType::f32;
  int values_h_ = -1, grads_h_ = -1, m_h_ = -1, v_h_ = -1, value_slots_h_ = -1, grad_slots_h_ = -1, compute_h_ = -1;
  Tensor values_, grads_, m_, v_, value_slots_, grad_slots_, compute_copy_;
  mutable std::uint64_t values_version_ = 0;
};

}  // namespace ustrain
