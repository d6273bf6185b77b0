#include "core/model/param_store.h"

#include <algorithm>
#include <cstddef>
#include <map>
#include <vector>

#include "core/model/rng.h"

namespace ustrain {
namespace {

constexpr std::int64_t kAlignFloats = MemoryPlan::kAlignment / sizeof(float);

std::int64_t round_up(std::int64_t n, std::int64_t a) { return (n + a - 1) / a * a; }

// Before the store is bound (a model only planned, to size what it will need) the ranges
// have no memory: their data stays null.
Tensor range_of(const Tensor& flat, std::int64_t begin, std::int64_t length) {
  void* data = flat.data ? static_cast<std::byte*>(flat.data) + begin * static_cast<std::int64_t>(dtype_size(flat.dtype))
                         : nullptr;
  return Tensor(data, Shape{length}, flat.dtype, flat.device);
}

}  // namespace

std::string ParamStore::plan_name(const std::string& what) const {
  // The dense store keeps the names plans always had.
  return group_ == SyncGroup::dense ? what : std::string(sync_group_name(group_)) + "." + what;
}

void ParamStore::plan(MemoryPlan& plan, ParamSharding sharding, DType compute) {
  USTRAIN_ASSERT(sharding.parts >= 1 && sharding.rank >= 0 && sharding.rank < sharding.parts &&
                     sharding.zero >= 0 && sharding.zero <= 3,
                 "bad parameter sharding");
  USTRAIN_ASSERT(compute == DType::f32 || compute == DType::bf16 || compute == DType::f16,
                 std::string("parameters cannot compute in ") + dtype_name(compute));
  registry_.seal();
  sharding_ = sharding;
  compute_ = compute;
  const std::vector<ParamSpec>& specs = registry_.specs();
  // The group's parameters by unit, in declaration order: one pass over them all, not one per
  // unit (a model of many experts has as many units as layers and thousands of parameters each).
  std::map<UnitId, std::vector<std::size_t>> by_unit;
  for (std::size_t i = 0; i < specs.size(); ++i)
    if (specs[i].sync == group_) by_unit[specs[i].unit].push_back(i);
  units_.assign(by_unit.size(), ParamUnit{});
  offset_.assign(specs.size(), -1);
  std::int64_t cursor = 0, shard_cursor = 0;
  std::size_t u = 0;
  for (const auto& [id, members] : by_unit) {
    ParamUnit& unit = units_[u++];
    unit.id = id;
    unit.begin = cursor;
    for (bool decay : {true, false}) {
      for (const std::size_t i : members) {
        const ParamSpec& s = specs[i];
        if (s.decay != decay) continue;
        if (!s.packed) cursor = round_up(cursor, kAlignFloats);
        offset_[i] = cursor;
        unit.params.push_back(static_cast<int>(i));
        cursor += s.local.numel();
      }
      if (decay) unit.decay_end = cursor;
    }
    // Equal, aligned chunks: one per rank.
    unit.length = round_up(cursor - unit.begin, kAlignFloats * sharding.parts);
    unit.shard_begin = shard_cursor;
    shard_cursor += unit.length / sharding.parts;
    cursor = unit.begin + unit.length;
  }
  flat_size_ = cursor;

  const auto flat = [&](const char* name, MemCategory cat, bool sharded) {
    return plan.add(plan_name(sharded ? std::string(name) + ".shard" : name), cat,
                    Shape{sharded ? shard_size() : flat_size_});
  };
  values_h_ = flat("parameters", MemCategory::parameters, shards_masters());
  grads_h_ = flat("gradients", MemCategory::gradients, sharding_.shards_grads());
  m_h_ = flat("adam_m", MemCategory::optimizer, sharding_.shards_optimizer());
  v_h_ = flat("adam_v", MemCategory::optimizer, sharding_.shards_optimizer());
  value_slots_h_ = grad_slots_h_ = compute_h_ = -1;
  if (compute_ != DType::f32)  // whole but at stage 3, whose units are gathered from it
    compute_h_ = plan.add(plan_name(sharding_.shards_values() ? "parameters.compute_copy.shard" : "parameters.compute_copy"),
                          MemCategory::parameters, Shape{sharding_.shards_values() ? shard_size() : flat_size_}, compute_);
  if (sharding_.shards_values())
    value_slots_h_ = plan.add(plan_name("zero.gathered_layers"), MemCategory::communication,
                              Shape{kValueSlots, largest_unit()}, compute_);
  if (sharding_.shards_grads())
    grad_slots_h_ = plan.add(plan_name("zero.gradient_buckets"), MemCategory::communication,
                             Shape{kGradSlots, largest_unit()});
}

int ParamStore::unit_index(UnitId id) const {
  // The units are laid out in UnitId order.
  const auto it = std::lower_bound(units_.begin(), units_.end(), id,
                                   [](const ParamUnit& u, const UnitId& wanted) { return u.id < wanted; });
  return it != units_.end() && it->id == id ? static_cast<int>(it - units_.begin()) : -1;
}

std::int64_t ParamStore::largest_unit() const {
  std::int64_t n = 0;
  for (const ParamUnit& u : units_) n = std::max(n, u.length);
  return n;
}

void ParamStore::bind(const PlannedMemory& mem) {
  values_ = mem.tensor(values_h_);
  grads_ = mem.tensor(grads_h_);
  m_ = mem.tensor(m_h_);
  v_ = mem.tensor(v_h_);
  value_slots_ = value_slots_h_ >= 0 ? mem.tensor(value_slots_h_) : Tensor();
  grad_slots_ = grad_slots_h_ >= 0 ? mem.tensor(grad_slots_h_) : Tensor();
  compute_copy_ = compute_h_ >= 0 ? mem.tensor(compute_h_) : Tensor();
  for (const ParamUnit& unit : units_) {
    for (int p : unit.params) {
      const auto i = static_cast<std::size_t>(p);
      const auto at = [&](const Tensor& flat) {
        const auto* base = static_cast<char*>(flat.data) + offset_[i] * static_cast<std::int64_t>(dtype_size(flat.dtype));
        return Tensor(const_cast<char*>(base), registry_.spec(p).local, flat.dtype, flat.device);
      };
      registry_.set_value_view(p, sharding_.shards_values() ? Tensor() : at(computed()));
      registry_.set_grad_view(p, sharding_.shards_grads() ? Tensor() : at(grads_));
    }
  }
}

Tensor ParamStore::unit_values(int u) const {
  USTRAIN_ASSERT(!shards_masters(), "values are sharded");
  const ParamUnit& unit = units_.at(static_cast<std::size_t>(u));
  return range_of(values_, unit.begin, unit.length);
}

Tensor ParamStore::unit_grads(int u) const {
  USTRAIN_ASSERT(!sharding_.shards_grads(), "gradients are sharded");
  const ParamUnit& unit = units_.at(static_cast<std::size_t>(u));
  return range_of(grads_, unit.begin, unit.length);
}

Tensor ParamStore::unit_compute_values(int u) const {
  USTRAIN_ASSERT(!sharding_.shards_values(), "values are sharded");
  const ParamUnit& unit = units_.at(static_cast<std::size_t>(u));
  return range_of(computed(), unit.begin, unit.length);
}

Tensor ParamStore::compute_chunk(int u) const {
  const ParamUnit& unit = units_.at(static_cast<std::size_t>(u));
  const std::int64_t c = unit.length / sharding_.parts;
  return range_of(computed(), sharding_.shards_values() ? unit.shard_begin : unit.begin + sharding_.rank * c, c);
}

Tensor ParamStore::replicated_values() const {
  if (sharding_.shards_values()) return {};
  return shards_masters() ? compute_copy_ : values_;
}

Tensor ParamStore::stored(ParamState state) const {
  switch (state) {
    case ParamState::value: return values_;
    case ParamState::adam_m: return m_;
    case ParamState::adam_v: return v_;
    case ParamState::grad: return grads_;
  }
  return {};
}

bool ParamStore::whole(ParamState state) const {
  switch (state) {
    case ParamState::value: return !shards_masters();
    case ParamState::grad: return !sharding_.shards_grads();
    default: return !sharding_.shards_optimizer();
  }
}

Tensor ParamStore::chunk_of(ParamState state, int u) const {
  const ParamUnit& unit = units_.at(static_cast<std::size_t>(u));
  const std::int64_t c = unit.length / sharding_.parts;
  const std::int64_t begin = whole(state) ? unit.begin + sharding_.rank * c : unit.shard_begin;
  return range_of(stored(state), begin, c);
}

Tensor ParamStore::grad_chunk(int u) const { return chunk_of(ParamState::grad, u); }

void ParamStore::point_unit(int u, const Tensor& buffer, bool values) {
  const ParamUnit& unit = units_.at(static_cast<std::size_t>(u));
  USTRAIN_ASSERT(buffer.dtype == (values ? compute_ : DType::f32), "a unit buffer of the wrong dtype");
  for (int p : unit.params) {
    const auto i = static_cast<std::size_t>(p);
    const Tensor view(range_of(buffer, offset_[i] - unit.begin, 0).data, registry_.spec(p).local, buffer.dtype,
                      buffer.device);
    if (values) registry_.set_value_view(p, view);
    else registry_.set_grad_view(p, view);
  }
}

void ParamStore::bind_unit_values(int u, const Tensor& buffer) { point_unit(u, buffer, /*values=*/true); }
void ParamStore::bind_unit_grads(int u, const Tensor& buffer) { point_unit(u, buffer, /*values=*/false); }

Tensor ParamStore::value_slot(int i) const {
  USTRAIN_ASSERT(!value_slots_.empty() && i >= 0 && i < kValueSlots, "no such value slot");
  return range_of(value_slots_, i * largest_unit(), largest_unit());
}

Tensor ParamStore::grad_slot(int i) const {
  USTRAIN_ASSERT(!grad_slots_.empty() && i >= 0 && i < kGradSlots, "no such gradient slot");
  return range_of(grad_slots_, i * largest_unit(), largest_unit());
}

std::vector<ParamPiece> ParamStore::pieces(ParamState state, bool chunk_only, bool owned_only) const {
  std::vector<ParamPiece> out;
  const Tensor storage = stored(state);
  const bool in_whole = whole(state);
  for (const ParamUnit& unit : units_) {
    const std::int64_t c = unit.length / sharding_.parts;
    const std::int64_t chunk_begin = unit.begin + sharding_.rank * c;
    const bool whole_params = in_whole && !chunk_only;
    for (int p : unit.params) {
      const ParamSpec& s = registry_.spec(p);
      if (owned_only && !s.owner) continue;
      const std::int64_t first = offset_[static_cast<std::size_t>(p)];
      const std::int64_t last = first + s.box.numel();  // the padding after the box is not a piece
      const std::int64_t a = whole_params ? first : std::max(first, chunk_begin);
      const std::int64_t b = whole_params ? last : std::min(last, chunk_begin + c);
      if (a >= b) continue;
      // Where element `a` of the flat index space lives in the storage.
      const std::int64_t at = in_whole ? a : unit.shard_begin + (a - chunk_begin);
      out.push_back({p, a - first, b - first, range_of(storage, at, b - a)});
    }
  }
  return out;
}

std::vector<ParamPiece> ParamStore::held(ParamState state) const {
  return pieces(state, /*chunk_only=*/false, /*owned_only=*/false);
}
std::vector<ParamPiece> ParamStore::owned(ParamState state) const {
  if (sharding_.replica != 0) return {};
  return pieces(state, /*chunk_only=*/true, /*owned_only=*/true);
}
std::vector<ParamPiece> ParamStore::updated_grads() const {
  return pieces(ParamState::grad, /*chunk_only=*/sharding_.shards_optimizer(), /*owned_only=*/false);
}

std::vector<OptimizerSegment> ParamStore::optimizer_segments() const {
  std::vector<OptimizerSegment> out;
  const bool sharded = sharding_.shards_optimizer();
  for (const ParamUnit& unit : units_) {
    if (unit.length == 0) continue;
    // The flat range this rank updates, and where it starts in each storage.
    const std::int64_t c = sharded ? unit.length / sharding_.parts : unit.length;
    const std::int64_t begin = unit.begin + (sharded ? sharding_.rank * c : 0);
    const auto view = [&](const Tensor& flat, bool is_shard, std::int64_t a, std::int64_t n) {
      return range_of(flat, is_shard ? unit.shard_begin + (a - begin) : a, n);
    };
    for (bool decay : {true, false}) {
      const std::int64_t a = std::max(begin, decay ? unit.begin : unit.decay_end);
      const std::int64_t b = std::min(begin + c, decay ? unit.decay_end : unit.begin + unit.length);
      if (a >= b) continue;
      out.push_back({decay, view(values_, shards_masters(), a, b - a), view(grads_, sharding_.shards_grads(), a, b - a),
                     view(m_, sharded, a, b - a), view(v_, sharded, a, b - a),
                     compute_copy_.empty() ? Tensor() : view(compute_copy_, sharding_.shards_values(), a, b - a)});
    }
  }
  return out;
}

std::vector<OptimizerPiece> ParamStore::optimizer_pieces() const {
  std::vector<OptimizerPiece> out;
  const bool sharded = sharding_.shards_optimizer();
  for (const ParamUnit& unit : units_) {
    const std::int64_t c = sharded ? unit.length / sharding_.parts : unit.length;
    const std::int64_t begin = unit.begin + (sharded ? sharding_.rank * c : 0);
    const auto view = [&](const Tensor& flat, bool is_shard, std::int64_t a, std::int64_t n) {
      return range_of(flat, is_shard ? unit.shard_begin + (a - begin) : a, n);
    };
    for (int p : unit.params) {
      const std::int64_t first = offset_[static_cast<std::size_t>(p)];
      const std::int64_t a = std::max(first, begin);
      const std::int64_t b = std::min(first + registry_.spec(p).box.numel(), begin + c);
      if (a >= b) continue;
      out.push_back({p, a - first, b - first, view(values_, shards_masters(), a, b - a),
                     view(grads_, sharding_.shards_grads(), a, b - a), view(m_, sharded, a, b - a),
                     view(v_, sharded, a, b - a),
                     compute_copy_.empty() ? Tensor() : view(compute_copy_, sharding_.shards_values(), a, b - a)});
    }
  }
  return out;
}

std::pair<std::int64_t, std::int64_t> ParamStore::update_range(int param, int rank) const {
  const bool sharded = sharding_.shards_optimizer();
  for (const ParamUnit& unit : units_) {
    if (std::find(unit.params.begin(), unit.params.end(), param) == unit.params.end()) continue;
    const std::int64_t c = sharded ? unit.length / sharding_.parts : unit.length;
    const std::int64_t begin = unit.begin + (sharded ? rank * c : 0);
    const std::int64_t first = offset_[static_cast<std::size_t>(param)];
    const std::int64_t a = std::max(first, begin);
    const std::int64_t b = std::min(first + registry_.spec(param).box.numel(), begin + c);
    return a < b ? std::pair{a - first, b - first} : std::pair<std::int64_t, std::int64_t>{0, 0};
  }
  USTRAIN_ASSERT(false, "the store holds no parameter " + std::to_string(param));
  return {0, 0};
}

void ParamStore::initialise(Backend& backend, std::uint64_t seed) const {
  // The padding after a box is never a piece: it keeps the zeros the planned memory starts with.
  std::vector<float> host;
  for (const ParamPiece& piece : held(ParamState::value)) {
    const ParamSpec& s = registry_.spec(piece.param);
    host.resize(static_cast<std::size_t>(piece.end - piece.begin));
    if (s.init_std <= 0) {
      std::fill(host.begin(), host.end(), 1.0f);
    } else {
      // Local element e is (row e / cols, column e % cols) of the box; a run of one local row
      // is a run of consecutive elements of one global row.
      const std::uint64_t stream = mix64(seed) ^ hash_string(s.name);
      const std::int64_t cols = s.local.rank() == 2 ? s.local[1] : s.local.numel();
      const std::int64_t global_cols = s.shape.rank() == 2 ? s.shape[1] : s.shape.numel();
      const std::int64_t row0 = s.box_begin[0], col0 = s.shape.rank() == 2 ? s.box_begin[1] : 0;
      for (std::int64_t e = piece.begin; e < piece.end;) {
        const std::int64_t r = s.local.rank() == 2 ? e / cols : 0, c = s.local.rank() == 2 ? e % cols : e;
        const std::int64_t run = std::min(cols - c, piece.end - e);
        const std::int64_t global = s.local.rank() == 2 ? (row0 + r) * global_cols + col0 + c : row0 + c;
        fill_normal(host.data() + (e - piece.begin), static_cast<std::size_t>(run), stream, s.init_std,
                    static_cast<std::uint64_t>(global));
        e += run;
      }
    }
    backend.copy(piece.data, Tensor(host.data(), piece.data.shape));
  }
  refresh_compute_copy(backend);
}

void ParamStore::refresh_compute_copy(Backend& backend) const {
  if (compute_copy_.empty()) return;
  ++values_version_;
  if (!shards_masters() || sharding_.shards_values()) {  // the copy is as whole as the masters
    backend.convert(compute_copy_, values_);
    return;
  }
  for (const ParamUnit& unit : units_) {  // this rank's chunk of each unit of the whole copy
    const std::int64_t c = unit.length / sharding_.parts;
    if (c > 0)
      backend.convert(range_of(compute_copy_, unit.begin + sharding_.rank * c, c), range_of(values_, unit.shard_begin, c));
  }
}

}  // namespace ustrain
