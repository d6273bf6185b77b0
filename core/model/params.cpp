#include "core/model/params.h"

#include <vector>

#include "core/rng.h"

namespace ustrain {

int ParamSet::declare(ParamSpec spec) {
  USTRAIN_ASSERT(!spec.packed || (!specs_.empty() && specs_.back().decay == spec.decay),
                 "a packed parameter must follow one of its group: " + spec.name);
  specs_.push_back(std::move(spec));
  return static_cast<int>(specs_.size() - 1);
}

void ParamSet::plan(MemoryPlan& plan) {
  layout_order_.clear();
  for (bool decay : {true, false})
    for (std::size_t i = 0; i < specs_.size(); ++i)
      if (specs_[i].decay == decay) layout_order_.push_back(static_cast<int>(i));
  handles_.assign(specs_.size(), Handles{});
  const auto add_all = [&](MemCategory cat, const char* suffix, int Handles::*field) {
    for (int i : layout_order_) {
      const ParamSpec& s = specs_[static_cast<std::size_t>(i)];
      const std::string name = s.name + suffix;
      handles_[static_cast<std::size_t>(i)].*field =
          s.packed ? plan.add_packed(name, cat, s.shape) : plan.add(name, cat, s.shape);
    }
  };
  add_all(MemCategory::parameters, "", &Handles::value);
  add_all(MemCategory::gradients, ".grad", &Handles::grad);
  add_all(MemCategory::optimizer, ".adam_m", &Handles::m);
  add_all(MemCategory::optimizer, ".adam_v", &Handles::v);
}

void ParamSet::bind(const PlannedMemory& mem) {
  views_.clear();
  for (const Handles& h : handles_)
    views_.push_back({mem.tensor(h.value), mem.tensor(h.grad), mem.tensor(h.m), mem.tensor(h.v)});
  const auto make_group = [&](bool decay) {
    int first = -1, last = -1;
    for (int i : layout_order_)
      if (specs_[static_cast<std::size_t>(i)].decay == decay) {
        if (first < 0) first = i;
        last = i;
      }
    Group g;
    if (first < 0) return g;
    const Handles& a = handles_[static_cast<std::size_t>(first)];
    const Handles& b = handles_[static_cast<std::size_t>(last)];
    g.value = mem.span(a.value, b.value);
    g.grad = mem.span(a.grad, b.grad);
    g.m = mem.span(a.m, b.m);
    g.v = mem.span(a.v, b.v);
    return g;
  };
  decay_group_ = make_group(true);
  no_decay_group_ = make_group(false);
  all_grads_ = mem.category(MemCategory::gradients);
}

static Tensor rows_view(const Tensor& first, const Tensor& last) {
  const auto* a = static_cast<const char*>(first.data);
  const auto* b = static_cast<const char*>(last.data);
  USTRAIN_ASSERT(first.shape.rank() == 2 && last.shape.rank() == 2 && first.shape[1] == last.shape[1] && b >= a,
                 "packed parameters must be matrices with equal columns");
  const std::int64_t rows = (b - a) / static_cast<std::ptrdiff_t>(first.shape[1] * 4) + last.shape[0];
  return Tensor(first.data, Shape{rows, first.shape[1]}, first.dtype, first.device);
}

Tensor ParamSet::packed_value(int first, int last) const { return rows_view((*this)[first].value, (*this)[last].value); }
Tensor ParamSet::packed_grad(int first, int last) const { return rows_view((*this)[first].grad, (*this)[last].grad); }

std::int64_t ParamSet::count() const {
  std::int64_t n = 0;
  for (const ParamSpec& s : specs_) n += s.shape.numel();
  return n;
}

ParamSet::Group ParamSet::group(bool decay) const { return decay ? decay_group_ : no_decay_group_; }

void ParamSet::initialise(Backend& backend, std::uint64_t seed) const {
  std::vector<float> host;
  for (std::size_t i = 0; i < specs_.size(); ++i) {
    const ParamSpec& s = specs_[i];
    host.resize(static_cast<std::size_t>(s.shape.numel()));
    if (s.init_std > 0)
      fill_normal(host.data(), host.size(), mix64(seed) ^ hash_string(s.name), s.init_std);
    else
      std::fill(host.begin(), host.end(), 1.0f);
    backend.copy(views_[i].value, Tensor(host.data(), s.shape));
  }
}

}  // namespace ustrain
