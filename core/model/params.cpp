#include "core/model/params.h"

#include <algorithm>
#include <vector>

#include "core/model/rng.h"

namespace ustrain {
namespace {

constexpr std::int64_t kAlignFloats = MemoryPlan::kAlignment / sizeof(float);

std::int64_t round_up(std::int64_t n, std::int64_t a) { return (n + a - 1) / a * a; }

}  // namespace

int ParamSet::declare(ParamDecl decl) {
  ParamSpec spec;
  static_cast<ParamDecl&>(spec) = std::move(decl);
  USTRAIN_ASSERT(spec.unit >= 0, "a parameter's unit is a layer index: " + spec.name);
  USTRAIN_ASSERT(!spec.packed || (!specs_.empty() && specs_.back().decay == spec.decay &&
                                  specs_.back().unit == spec.unit),
                 "a packed parameter must follow one of its unit and group: " + spec.name);
  spec.local = spec.shape;
  spec.box = spec.shape;
  spec.box_begin.assign(static_cast<std::size_t>(spec.shape.rank()), 0);
  specs_.push_back(std::move(spec));
  return static_cast<int>(specs_.size() - 1);
}

void ParamSet::place(int handle, TpLayout layout, Shape local, std::vector<std::int64_t> begin, Shape box,
                     bool partial_grads, bool owner) {
  ParamSpec& s = specs_.at(static_cast<std::size_t>(handle));
  USTRAIN_ASSERT(values_.empty(), "parameters are placed before they are planned: " + s.name);
  USTRAIN_ASSERT(local.rank() == s.shape.rank() && box.rank() == s.shape.rank() &&
                     begin.size() == static_cast<std::size_t>(s.shape.rank()),
                 "placement of another rank than the parameter: " + s.name);
  for (int d = 0; d < s.shape.rank(); ++d) {
    const auto i = static_cast<std::size_t>(d);
    USTRAIN_ASSERT(begin[i] >= 0 && begin[i] + box[d] <= s.shape[d] && box[d] <= local[d] &&
                       (d == 0 || box[d] == local[d]),
                   "the box of " + s.name + " leaves the tensor, or is padded outside dimension 0");
  }
  s.layout = layout;
  s.local = local;
  s.box_begin = std::move(begin);
  s.box = box;
  s.partial_grads = partial_grads;
  s.owner = owner;
}

void ParamSet::plan(MemoryPlan& plan, ParamSharding sharding, DType compute) {
  USTRAIN_ASSERT(sharding.parts >= 1 && sharding.rank >= 0 && sharding.rank < sharding.parts &&
                     sharding.zero >= 0 && sharding.zero <= 3,
                 "bad parameter sharding");
  USTRAIN_ASSERT(compute == DType::f32 || compute == DType::bf16 || compute == DType::f16,
                 std::string("parameters cannot compute in ") + dtype_name(compute));
  USTRAIN_ASSERT(compute == DType::f32 || !sharding.shards_values(), "ZeRO-3 computes in fp32 only");
  sharding_ = sharding;
  compute_ = compute;
  int n_units = 0;
  for (const ParamSpec& s : specs_) n_units = std::max(n_units, s.unit + 1);
  units_.assign(static_cast<std::size_t>(n_units), ParamUnit{});
  offset_.assign(specs_.size(), 0);
  unit_of_.assign(specs_.size(), 0);
  std::int64_t cursor = 0, shard_cursor = 0;
  for (int u = 0; u < n_units; ++u) {
    ParamUnit& unit = units_[static_cast<std::size_t>(u)];
    unit.begin = cursor;
    for (bool decay : {true, false}) {
      for (std::size_t i = 0; i < specs_.size(); ++i) {
        const ParamSpec& s = specs_[i];
        if (s.unit != u || s.decay != decay) continue;
        if (!s.packed) cursor = round_up(cursor, kAlignFloats);
        offset_[i] = cursor;
        unit_of_[i] = u;
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
    return plan.add(name, cat, Shape{sharded ? shard_size() : flat_size_});
  };
  values_h_ = flat(sharding_.shards_values() ? "parameters.shard" : "parameters", MemCategory::parameters,
                   sharding_.shards_values());
  grads_h_ = flat(sharding_.shards_grads() ? "gradients.shard" : "gradients", MemCategory::gradients,
                  sharding_.shards_grads());
  m_h_ = flat(sharding_.shards_optimizer() ? "adam_m.shard" : "adam_m", MemCategory::optimizer,
              sharding_.shards_optimizer());
  v_h_ = flat(sharding_.shards_optimizer() ? "adam_v.shard" : "adam_v", MemCategory::optimizer,
              sharding_.shards_optimizer());
  value_slots_h_ = grad_slots_h_ = compute_h_ = -1;
  if (compute_ != DType::f32)
    compute_h_ = plan.add("parameters.compute_copy", MemCategory::parameters, Shape{flat_size_}, compute_);
  if (sharding_.shards_values())
    value_slots_h_ = plan.add("zero.gathered_layers", MemCategory::communication,
                              Shape{kValueSlots, largest_unit()});
  if (sharding_.shards_grads())
    grad_slots_h_ = plan.add("zero.gradient_buckets", MemCategory::communication,
                             Shape{kGradSlots, largest_unit()});
}

std::int64_t ParamSet::largest_unit() const {
  std::int64_t n = 0;
  for (const ParamUnit& u : units_) n = std::max(n, u.length);
  return n;
}

void ParamSet::bind(const PlannedMemory& mem) {
  values_ = mem.tensor(values_h_);
  grads_ = mem.tensor(grads_h_);
  m_ = mem.tensor(m_h_);
  v_ = mem.tensor(v_h_);
  value_slots_ = value_slots_h_ >= 0 ? mem.tensor(value_slots_h_) : Tensor();
  grad_slots_ = grad_slots_h_ >= 0 ? mem.tensor(grad_slots_h_) : Tensor();
  compute_copy_ = compute_h_ >= 0 ? mem.tensor(compute_h_) : Tensor();
  views_.assign(specs_.size(), ParamViews{});
  for (std::size_t i = 0; i < specs_.size(); ++i) {
    const auto at = [&](const Tensor& flat) {
      const auto* base = static_cast<char*>(flat.data) + offset_[i] * static_cast<std::int64_t>(dtype_size(flat.dtype));
      return Tensor(const_cast<char*>(base), specs_[i].local, flat.dtype, flat.device);
    };
    if (!sharding_.shards_values()) views_[i].value = at(compute_copy_.empty() ? values_ : compute_copy_);
    if (!sharding_.shards_grads()) views_[i].grad = at(grads_);
  }
}

static Tensor range_of(const Tensor& flat, std::int64_t begin, std::int64_t length) {
  return Tensor(flat.f32() + begin, Shape{length}, DType::f32, flat.device);
}

Tensor ParamSet::unit_values(int u) const {
  USTRAIN_ASSERT(!sharding_.shards_values(), "values are sharded");
  const ParamUnit& unit = units_.at(static_cast<std::size_t>(u));
  return range_of(values_, unit.begin, unit.length);
}

Tensor ParamSet::unit_grads(int u) const {
  USTRAIN_ASSERT(!sharding_.shards_grads(), "gradients are sharded");
  const ParamUnit& unit = units_.at(static_cast<std::size_t>(u));
  return range_of(grads_, unit.begin, unit.length);
}

Tensor ParamSet::stored(ParamState state) const {
  switch (state) {
    case ParamState::value: return values_;
    case ParamState::adam_m: return m_;
    case ParamState::adam_v: return v_;
    case ParamState::grad: return grads_;
  }
  return {};
}

bool ParamSet::whole(ParamState state) const {
  switch (state) {
    case ParamState::value: return !sharding_.shards_values();
    case ParamState::grad: return !sharding_.shards_grads();
    default: return !sharding_.shards_optimizer();
  }
}

Tensor ParamSet::chunk_of(ParamState state, int u) const {
  const ParamUnit& unit = units_.at(static_cast<std::size_t>(u));
  const std::int64_t c = unit.length / sharding_.parts;
  const std::int64_t begin = whole(state) ? unit.begin + sharding_.rank * c : unit.shard_begin;
  return range_of(stored(state), begin, c);
}

Tensor ParamSet::grad_chunk(int u) const {
  const ParamUnit& unit = units_.at(static_cast<std::size_t>(u));
  const std::int64_t c = unit.length / sharding_.parts;
  return range_of(grads_, sharding_.shards_grads() ? unit.shard_begin : unit.begin + sharding_.rank * c, c);
}

void ParamSet::point_unit(int u, const Tensor& buffer, Tensor ParamViews::*field) {
  const ParamUnit& unit = units_.at(static_cast<std::size_t>(u));
  for (int p : unit.params) {
    const auto i = static_cast<std::size_t>(p);
    views_[i].*field = Tensor(buffer.f32() + (offset_[i] - unit.begin), specs_[i].local, DType::f32, buffer.device);
  }
}

void ParamSet::bind_unit_values(int u, const Tensor& buffer) { point_unit(u, buffer, &ParamViews::value); }
void ParamSet::bind_unit_grads(int u, const Tensor& buffer) { point_unit(u, buffer, &ParamViews::grad); }

Tensor ParamSet::value_slot(int i) const {
  USTRAIN_ASSERT(!value_slots_.empty() && i >= 0 && i < kValueSlots, "no such value slot");
  return range_of(value_slots_, i * largest_unit(), largest_unit());
}

Tensor ParamSet::grad_slot(int i) const {
  USTRAIN_ASSERT(!grad_slots_.empty() && i >= 0 && i < kGradSlots, "no such gradient slot");
  return range_of(grad_slots_, i * largest_unit(), largest_unit());
}

std::vector<ParamPiece> ParamSet::pieces(ParamState state, bool chunk_only, bool owned_only) const {
  std::vector<ParamPiece> out;
  const Tensor storage = stored(state);
  const bool in_whole = whole(state);
  for (std::size_t u = 0; u < units_.size(); ++u) {
    const ParamUnit& unit = units_[u];
    const std::int64_t c = unit.length / sharding_.parts;
    const std::int64_t chunk_begin = unit.begin + sharding_.rank * c;
    const bool whole_params = in_whole && !chunk_only;
    for (int p : unit.params) {
      const ParamSpec& s = specs_[static_cast<std::size_t>(p)];
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

std::vector<ParamPiece> ParamSet::held(ParamState state) const {
  return pieces(state, /*chunk_only=*/false, /*owned_only=*/false);
}
std::vector<ParamPiece> ParamSet::owned(ParamState state) const {
  return pieces(state, /*chunk_only=*/true, /*owned_only=*/true);
}
std::vector<ParamPiece> ParamSet::updated_grads() const {
  return pieces(ParamState::grad, /*chunk_only=*/sharding_.shards_optimizer(), /*owned_only=*/false);
}

std::vector<OptimizerSegment> ParamSet::optimizer_segments() const {
  std::vector<OptimizerSegment> out;
  const bool sharded = sharding_.shards_optimizer();
  for (std::size_t u = 0; u < units_.size(); ++u) {
    const ParamUnit& unit = units_[u];
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
      out.push_back({decay, view(values_, sharding_.shards_values(), a, b - a),
                     view(grads_, sharding_.shards_grads(), a, b - a), view(m_, sharded, a, b - a),
                     view(v_, sharded, a, b - a)});
    }
  }
  return out;
}

static Tensor rows_view(const Tensor& first, const Tensor& last) {
  const auto* a = static_cast<const char*>(first.data);
  const auto* b = static_cast<const char*>(last.data);
  USTRAIN_ASSERT(first.shape.rank() == 2 && last.shape.rank() == 2 && first.shape[1] == last.shape[1] && b >= a,
                 "packed parameters must be matrices with equal columns");
  const auto row_bytes = static_cast<std::ptrdiff_t>(first.shape[1] * static_cast<std::int64_t>(dtype_size(first.dtype)));
  const std::int64_t rows = (b - a) / row_bytes + last.shape[0];
  return Tensor(first.data, Shape{rows, first.shape[1]}, first.dtype, first.device);
}

Tensor ParamSet::packed_value(int first, int last) const { return rows_view((*this)[first].value, (*this)[last].value); }
Tensor ParamSet::packed_grad(int first, int last) const { return rows_view((*this)[first].grad, (*this)[last].grad); }

std::vector<ParamDecl> ParamSet::whole_model() const {
  if (!whole_model_.empty()) return whole_model_;
  return {specs_.begin(), specs_.end()};
}

std::int64_t ParamSet::count() const {
  std::int64_t n = 0;
  for (const ParamDecl& s : whole_model()) n += s.shape.numel();
  return n;
}

void ParamSet::initialise(Backend& backend, std::uint64_t seed) const {
  // The padding after a box is never a piece: it keeps the zeros the planned memory starts with.
  std::vector<float> host;
  for (const ParamPiece& piece : held(ParamState::value)) {
    const ParamSpec& s = specs_[static_cast<std::size_t>(piece.param)];
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

void ParamSet::refresh_compute_copy(Backend& backend) const {
  if (!compute_copy_.empty()) backend.convert(compute_copy_, values_);
}

}  // namespace ustrain
