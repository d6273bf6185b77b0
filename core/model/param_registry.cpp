#include "core/model/param_registry.h"

#include "kernels/error.h"

namespace ustrain {

const char* sync_group_name(SyncGroup g) {
  switch (g) {
    case SyncGroup::dense: return "dense";
    case SyncGroup::experts: return "experts";
  }
  return "?";
}

std::string UnitId::str() const {
  switch (kind) {
    case Kind::embedding: return "embedding";
    case Kind::layer: return "layer " + std::to_string(index);
    case Kind::experts: return "experts " + std::to_string(index);
    case Kind::head: return "head";
    case Kind::tied_head: return "tied head";
  }
  return "?";
}

int ParamRegistry::declare(ParamDecl decl) {
  ParamSpec spec;
  static_cast<ParamDecl&>(spec) = std::move(decl);
  USTRAIN_ASSERT(!sealed_, "parameters are declared before they are laid out: " + spec.name);
  USTRAIN_ASSERT(spec.unit.index >= 0, "a unit's index is not negative: " + spec.name);
  USTRAIN_ASSERT(!spec.packed || (!specs_.empty() && specs_.back().decay == spec.decay &&
                                  specs_.back().unit == spec.unit && specs_.back().sync == spec.sync),
                 "a packed parameter must follow one of its unit and group: " + spec.name);
  const auto [unit, added] = unit_groups_.emplace(spec.unit, spec.sync);
  USTRAIN_ASSERT(added || unit->second == spec.sync, "every parameter of a unit belongs to one sync group: " + spec.name);
  spec.local = spec.shape;
  spec.box = spec.shape;
  spec.box_begin.assign(static_cast<std::size_t>(spec.shape.rank()), 0);
  specs_.push_back(std::move(spec));
  views_.emplace_back();
  return static_cast<int>(specs_.size() - 1);
}

void ParamRegistry::place(int handle, TpLayout layout, Shape local, std::vector<std::int64_t> begin, Shape box,
                          bool partial_grads, bool owner) {
  ParamSpec& s = specs_.at(static_cast<std::size_t>(handle));
  USTRAIN_ASSERT(!sealed_, "parameters are placed before they are laid out: " + s.name);
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

static Tensor rows_view(const Tensor& first, const Tensor& last) {
  const auto* a = static_cast<const char*>(first.data);
  const auto* b = static_cast<const char*>(last.data);
  USTRAIN_ASSERT(first.shape.rank() == 2 && last.shape.rank() == 2 && first.shape[1] == last.shape[1] && b >= a,
                 "packed parameters must be matrices with equal columns");
  const auto row_bytes = static_cast<std::ptrdiff_t>(first.shape[1] * static_cast<std::int64_t>(dtype_size(first.dtype)));
  const std::int64_t rows = (b - a) / row_bytes + last.shape[0];
  return Tensor(first.data, Shape{rows, first.shape[1]}, first.dtype, first.device);
}

Tensor ParamRegistry::packed_value(int first, int last) const { return rows_view((*this)[first].value, (*this)[last].value); }
Tensor ParamRegistry::packed_grad(int first, int last) const { return rows_view((*this)[first].grad, (*this)[last].grad); }

std::vector<ParamDecl> ParamRegistry::whole_model() const {
  if (whole_model_) return whole_model_();
  return {specs_.begin(), specs_.end()};
}

std::int64_t ParamRegistry::count() const {
  std::int64_t n = 0;
  for (const ParamDecl& s : whole_model()) n += s.shape.numel();
  return n;
}

bool ParamRegistry::has(SyncGroup g) const {
  for (const ParamSpec& s : specs_)
    if (s.sync == g) return true;
  return false;
}

}  // namespace ustrain
