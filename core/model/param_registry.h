// What a model declares of its parameters, and where this rank's part of each lives.
//
// Layers declare parameters by their Hugging Face names (global shapes), each in a unit: what
// a ZeRO-3 engine gathers at once and whose gradients it reduces at once (a layer). Unit ids
// have a namespace (the embedding, layer l, the head, ...) rather than an index agreed by
// convention. Each parameter also belongs to a gradient-sync group: the ranks over which its
// gradients are summed and its training state is sharded (dense parameters: dp x cp; expert
// parameters, once they exist: the expert-gradient group). Every unit lies in one group.
//
// A sharding step (core/distributed/parallelize.h) then places each parameter: which box of
// the global tensor this rank stores, split how over the tensor-parallel ranks, whether its
// gradient is a partial sum and whether this rank owns it (saves it, counts it in the norm).
//
// The storage behind the parameters is not the registry's: one ParamStore per sync group
// (core/model/param_store.h) lays its parameters out and points the views here into its
// memory. Layers read their parameters only through these views.
#pragma once

#include <compare>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "kernels/tensor.h"

namespace ustrain {

// How a parameter is split over the tensor-parallel ranks (core/distributed/parallelize.h).
enum class TpLayout : std::uint8_t {
  replicated,       // every rank holds all of it (norm gains)
  column_parallel,  // dimension 0 (the output features of an (out, in) weight) in tp blocks
  row_parallel,     // dimension 1 (the input features) in tp blocks
  vocab_parallel,   // dimension 0 in tp blocks after padding it to a multiple of tp
};

// The ranks whose gradients of a parameter add up, and over which its state is sharded.
enum class SyncGroup : std::uint8_t { dense, experts };
inline constexpr int kSyncGroups = 2;
const char* sync_group_name(SyncGroup g);

// A unit of parameters. Units are laid out (and ZeRO-3 gathers them) in this order.
struct UnitId {
  enum class Kind : std::uint8_t {
    embedding,  // the token embedding (and a tied head on the same rank)
    layer,      // decoder layer `index` (its dense parameters)
    experts,    // the experts of layer `index` (their own sync group)
    head,       // the final norm and an untied output head
    tied_head,  // the last pipeline stage's copy of a tied embedding
  };
  Kind kind = Kind::embedding;
  int index = 0;

  static UnitId embedding() { return {Kind::embedding, 0}; }
  static UnitId layer(int l) { return {Kind::layer, l}; }
  static UnitId experts(int l) { return {Kind::experts, l}; }
  static UnitId head() { return {Kind::head, 0}; }
  static UnitId tied_head() { return {Kind::tied_head, 0}; }
  auto operator<=>(const UnitId&) const = default;
  std::string str() const;  // "embedding", "layer 3", "experts 3", "head", "tied head"
};

// What the model declares of a parameter: its global identity and initialisation.
struct ParamDecl {
  std::string name;    // Hugging Face name, e.g. "model.layers.0.self_attn.q_proj.weight"
  Shape shape;         // global shape
  bool decay = true;   // weight decay applies (matrices) or not (norm gains)
  bool packed = false; // contiguous with the previous declaration (same unit and group)
  double init_std = 0; // normal(0, init_std); 0 means "ones" (norm gains)
  UnitId unit;
  SyncGroup sync = SyncGroup::dense;
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

// Views of one parameter: the value the model computes with (the compute copy in mixed
// precision) and its fp32 gradient (while its unit is bound, see ParamStore).
struct ParamViews {
  Tensor value, grad;
};

class ParamRegistry {
 public:
  // Returns a handle used to look the parameter up once its store is bound. The whole tensor
  // until place() says otherwise.
  int declare(ParamDecl decl);
  // Before the stores plan: this rank keeps `box` (extent, starting at `begin`) of parameter
  // `handle` in storage of shape `local` (box padded at the end of dimension 0), split as
  // `layout`.
  void place(int handle, TpLayout layout, Shape local, std::vector<std::int64_t> begin, Shape box,
             bool partial_grads, bool owner);

  const ParamViews& operator[](int handle) const { return views_.at(static_cast<std::size_t>(handle)); }
  // Rows of `first` through `last` (packed neighbours) as one (sum of rows, cols) matrix.
  Tensor packed_value(int first, int last) const;
  Tensor packed_grad(int first, int last) const;

  const std::vector<ParamSpec>& specs() const { return specs_; }
  const ParamSpec& spec(int handle) const { return specs_.at(static_cast<std::size_t>(handle)); }
  // Every parameter of the whole model (names, global shapes), of which this rank holds some
  // (a pipeline stage holds its layers'): what a checkpoint lists. By default what it holds.
  // Made when asked for: declaring a whole model costs more than most ranks' own parameters,
  // and only a checkpoint or a report asks (a planner makes thousands of ranks that never do).
  void set_whole_model(std::function<std::vector<ParamDecl>()> whole) { whole_model_ = std::move(whole); }
  std::vector<ParamDecl> whole_model() const;
  std::int64_t count() const;  // number of scalar parameters of the whole model
  bool has(SyncGroup g) const;  // does this rank hold a parameter of group g

  // For the stores: where the views of parameter `handle` point.
  void set_value_view(int handle, Tensor value) {
    views_.at(static_cast<std::size_t>(handle)).value = value;
    if (view_moved_) view_moved_(handle, /*value=*/true);
  }
  void set_grad_view(int handle, Tensor grad) {
    views_.at(static_cast<std::size_t>(handle)).grad = grad;
    if (view_moved_) view_moved_(handle, /*value=*/false);
  }
  // Called after a view of a parameter moved (a ZeRO engine bound its unit into a reused
  // buffer), so that state kept by a tensor's address follows its parameter (core/step/
  // fp8_layers.h). One listener.
  using ViewMoved = std::function<void(int handle, bool value)>;
  void on_view_moved(ViewMoved listener) { view_moved_ = std::move(listener); }
  // Once a store has laid the parameters out, placements are final.
  void seal() { sealed_ = true; }

 private:
  std::vector<ParamSpec> specs_;
  std::map<UnitId, SyncGroup> unit_groups_;  // the sync group of each unit declared so far
  std::function<std::vector<ParamDecl>()> whole_model_;  // empty: what this rank holds
  std::vector<ParamViews> views_;
  ViewMoved view_moved_;
  bool sealed_ = false;
};

}  // namespace ustrain
