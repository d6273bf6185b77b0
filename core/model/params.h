// Parameters of a model, with their gradients and AdamW moments, laid out by the memory plan.
//
// Layers declare parameters by their Hugging Face names, each in a unit (a layer: the unit a
// ZeRO-3 engine gathers at once and whose gradients it reduces at once). The set lays all
// parameters out in one flat index space, unit after unit; inside a unit the weight-decayed
// parameters come first, then the others (norm gains); a parameter declared `packed`
// follows the previous one with no padding, so q/k/v (or gate/up) form one matrix for one
// fused GEMM. Each unit is padded to a multiple of (ranks x 64) floats so that it splits
// into equal, aligned chunks, one per data-parallel rank: chunk r of every unit is rank r's
// shard.
//
// What is stored depends on the ZeRO stage (ParamSharding::zero), per rank, Psi = the flat
// size:                 values      gradients   AdamW m and v
//   stage 0             Psi         Psi         2 Psi
//   stage 1             Psi         Psi         2 Psi / N
//   stage 2             Psi         Psi / N     2 Psi / N     (+ gradient buckets)
//   stage 3             Psi / N     Psi / N     2 Psi / N     (+ gathered layers)
// In mixed precision the model computes with a copy of the values in its compute dtype (bf16
// or fp16, Psi elements more in `parameters`); the stored fp32 values are the master weights
// that the optimizer updates and checkpoints hold, and refresh_compute_copy() rewrites the
// copy after they change.
// With sharded values or gradients, a unit's value and gradient views point into
// communication buffers that a data-parallel engine binds while the unit is in use
// (bind_unit_values, bind_unit_grads); the model reads the views at each call.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/memory/memory_plan.h"

namespace ustrain {

// How a parameter is split over the tensor-parallel ranks (core/distributed/parallelize.h).
enum class TpLayout : std::uint8_t {
  replicated,       // every rank holds all of it (norm gains)
  column_parallel,  // dimension 0 (the output features of an (out, in) weight) in tp blocks
  row_parallel,     // dimension 1 (the input features) in tp blocks
  vocab_parallel,   // dimension 0 in tp blocks after padding it to a multiple of tp
};

// What the model declares of a parameter: its global identity and initialisation.
struct ParamDecl {
  std::string name;    // Hugging Face name, e.g. "model.layers.0.self_attn.q_proj.weight"
  Shape shape;         // global shape
  bool decay = true;   // weight decay applies (matrices) or not (norm gains)
  bool packed = false; // contiguous with the previous declaration (same unit and group)
  double init_std = 0; // normal(0, init_std); 0 means "ones" (norm gains)
  int unit = 0;        // the layer it belongs to; units are laid out in increasing order
};

// A declared parameter and this rank's part of it, which the sharding step sets (by default:
// the whole tensor).
struct ParamSpec : ParamDecl {
  TpLayout layout = TpLayout::replicated;
  Shape local;                          // what this rank stores (set by declare: the shape)
  std::vector<std::int64_t> box_begin;  // where the stored part starts in the global tensor
  Shape box;  // its extent: the real elements, the first box.numel() of the stored ones (the
              // rest pads a vocabulary to a multiple of tp and stays zero)
  bool partial_grads = false;  // each tp rank's gradient is a partial sum: add them over tp
  bool owner = true;           // this rank saves it and counts it in the gradient norm (of the
                               // ranks that replicate a parameter, only one owns it)
};

// How the training state is split over the data-parallel ranks.
struct ParamSharding {
  int parts = 1;  // data-parallel ranks
  int rank = 0;   // this rank among them
  int zero = 0;   // ZeRO stage, 0..3
  bool shards_optimizer() const { return zero >= 1 && parts > 1; }
  bool shards_grads() const { return zero >= 2 && parts > 1; }
  bool shards_values() const { return zero >= 3 && parts > 1; }
};

// Views of one parameter: the value the model computes with (the compute copy in mixed
// precision) and its fp32 gradient (while its unit is bound, see above).
struct ParamViews {
  Tensor value, grad;
};

// A unit's place in the flat index space.
struct ParamUnit {
  std::int64_t begin = 0;       // first float
  std::int64_t length = 0;      // floats, a multiple of parts x 64
  std::int64_t decay_end = 0;   // [begin, decay_end) holds the weight-decayed parameters
  std::int64_t shard_begin = 0; // where this unit's chunk starts in a rank's shard
  std::vector<int> params;      // handles, in layout order
};

enum class ParamState { value, adam_m, adam_v, grad };

// Part of one parameter in some storage: elements [begin, end) of the flattened (row-major)
// parameter, held contiguously by `data`.
struct ParamPiece {
  int param = 0;
  std::int64_t begin = 0, end = 0;
  Tensor data;  // (end - begin) floats
};

// One contiguous range the optimizer updates with one AdamW call.
struct OptimizerSegment {
  bool decay = true;
  Tensor value, grad, m, v;
};

class ParamSet {
 public:
  // Returns a handle used to look the parameter up after bind(). The whole tensor until
  // place() says otherwise.
  int declare(ParamDecl decl);
  // Before plan(): this rank keeps `box` (extent, starting at `begin`) of parameter `handle`
  // in storage of shape `local` (box padded at the end of dimension 0), split as `layout`.
  void place(int handle, TpLayout layout, Shape local, std::vector<std::int64_t> begin, Shape box,
             bool partial_grads, bool owner);
  // Adds values, gradients, moments, the compute copy (when `compute` is not f32) and (for
  // sharded stages) communication buffers to the plan. ZeRO-3 computes in fp32 only.
  void plan(MemoryPlan& plan, ParamSharding sharding = {}, DType compute = DType::f32);
  void bind(const PlannedMemory& mem);
  DType compute_dtype() const { return compute_; }
  // After the stored values change (initialise, load, optimizer step): rewrites the compute
  // copy from them. Does nothing when the model computes in fp32.
  void refresh_compute_copy(Backend& backend) const;

  const ParamViews& operator[](int handle) const { return views_.at(static_cast<std::size_t>(handle)); }
  // Rows of `first` through `last` (packed neighbours) as one (sum of rows, cols) matrix.
  Tensor packed_value(int first, int last) const;
  Tensor packed_grad(int first, int last) const;

  const std::vector<ParamSpec>& specs() const { return specs_; }
  // Every parameter of the whole model (names, global shapes), of which this set holds some
  // (a pipeline stage holds its layers'): what a checkpoint lists. By default what it holds.
  void set_whole_model(std::vector<ParamDecl> whole) { whole_model_ = std::move(whole); }
  std::vector<ParamDecl> whole_model() const;
  std::int64_t count() const;  // number of scalar parameters of the whole model
  const ParamSharding& sharding() const { return sharding_; }
  const std::vector<ParamUnit>& units() const { return units_; }
  std::int64_t flat_size() const { return flat_size_; }    // Psi, padding included
  std::int64_t shard_size() const { return flat_size_ / sharding_.parts; }
  std::int64_t largest_unit() const;                       // floats

  // Gradient storage between steps: the whole flat gradient, or this rank's shard of it
  // (stages 2 and 3). Padding is zero.
  Tensor all_grads() const { return grads_; }
  // Stored values: the whole flat index space, or this rank's shard (stage 3).
  Tensor all_values() const { return values_; }
  // Unit u's range of the whole values / gradients (stages that store them whole).
  Tensor unit_values(int u) const;
  Tensor unit_grads(int u) const;
  // This rank's chunk of unit u in the stored values / gradients / moments (whole or shard).
  Tensor chunk_of(ParamState state, int u) const;
  Tensor grad_chunk(int u) const;

  // Points the views of unit u's parameters into `unit_buffer` (ParamUnit::length floats),
  // laid out like the flat index space. For sharded values (stage 3) and gradients (2, 3).
  void bind_unit_values(int u, const Tensor& unit_buffer);
  void bind_unit_grads(int u, const Tensor& unit_buffer);
  // Communication buffers planned for the sharded stages: `slots` buffers of largest_unit().
  Tensor value_slot(int i) const;
  Tensor grad_slot(int i) const;
  static constexpr int kValueSlots = 3;  // two layers in use (a tied head) plus one prefetched
  static constexpr int kGradSlots = 3;   // two being reduced plus one being written

  // What this rank keeps of one state between steps (whole parameters, or its chunks):
  // what initialisation and loading fill.
  std::vector<ParamPiece> held(ParamState state) const;
  // This rank's chunk of every parameter it owns (whole ones at dp = 1): what it saves and
  // counts in the gradient norm. The ranks' chunks together cover every parameter once.
  // Pieces never cover padding.
  std::vector<ParamPiece> owned(ParamState state) const;
  // The gradients this rank's optimizer reads after the reduction: whole parameters (stage
  // 0) or its chunks.
  std::vector<ParamPiece> updated_grads() const;
  // The ranges AdamW updates on this rank: every unit (stage 0) or this rank's chunks.
  std::vector<OptimizerSegment> optimizer_segments() const;

  // Deterministic initialisation from the seed: each element depends only on (seed, name,
  // index in the global tensor), never on the layout, sharding or thread count.
  void initialise(Backend& backend, std::uint64_t seed) const;

 private:
  Tensor stored(ParamState state) const;
  bool whole(ParamState state) const;
  std::vector<ParamPiece> pieces(ParamState state, bool chunk_only, bool owned_only) const;
  void point_unit(int u, const Tensor& buffer, Tensor ParamViews::*field);

  std::vector<ParamSpec> specs_;
  std::vector<ParamDecl> whole_model_;
  std::vector<std::int64_t> offset_;  // per handle: first float in the flat index space
  std::vector<ParamUnit> units_;
  std::vector<int> unit_of_;          // per handle: index into units_
  std::int64_t flat_size_ = 0;
  ParamSharding sharding_;
  std::vector<ParamViews> views_;
  DType compute_ = DType::f32;
  int values_h_ = -1, grads_h_ = -1, m_h_ = -1, v_h_ = -1, value_slots_h_ = -1, grad_slots_h_ = -1, compute_h_ = -1;
  Tensor values_, grads_, m_, v_, value_slots_, grad_slots_, compute_copy_;
};

}  // namespace ustrain
