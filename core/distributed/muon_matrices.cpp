#include "core/distributed/muon_matrices.h"

#include <numeric>
#include <string_view>

namespace ustrain {

bool muon_updates(const ParamSpec& spec) {
  const bool hidden = spec.unit.kind == UnitId::Kind::layer || spec.unit.kind == UnitId::Kind::experts;
  // The router is "...mlp.gate.weight" (Hugging Face's name); the MLPs' are "...gate_proj.weight".
  const std::string_view name = spec.name;
  const bool router = name.ends_with(".gate.weight");
  return hidden && !router && spec.shape.rank() == 2;
}

MuonTpSplit muon_tp_split(const ParamStore& store) {
  for (const ParamUnit& unit : store.units())
    for (int p : unit.params) {
      const ParamSpec& s = store.registry().spec(p);
      if (!muon_updates(s) || s.layout == TpLayout::replicated) continue;
      const int dim = s.layout == TpLayout::row_parallel ? 1 : 0;
      return {static_cast<int>(s.shape[dim] / s.local[dim]), static_cast<int>(s.box_begin[static_cast<std::size_t>(dim)] / s.local[dim])};
    }
  return {};
}

std::vector<MuonMatrix> muon_matrices(const ParamStore& store) {
  std::vector<MuonMatrix> out;
  const ParamRegistry& registry = store.registry();
  for (const ParamUnit& unit : store.units())
    for (int p : unit.params)
      if (const ParamSpec& s = registry.spec(p); muon_updates(s))
        out.push_back({p, s.shape[0], s.shape[1], s.local[0], s.local[1], s.layout, store.sharding().rank, 0});
  // Owner slots: (sync-group member, tp rank) pairs; unsharded, this rank's tp group alone.
  const bool sharded = store.sharding().shards_optimizer();
  const int tp = muon_tp_split(store).parts;
  std::vector<std::size_t> order(out.size());
  std::iota(order.begin(), order.end(), 0);
  const auto work = [&](std::size_t i) { return out[i].small_side() * out[i].numel(); };  // multiply-adds per step
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return work(a) > work(b); });
  std::vector<std::int64_t> load(static_cast<std::size_t>((sharded ? store.sharding().parts : 1) * tp), 0);
  for (std::size_t i : order) {
    const auto slot = static_cast<int>(std::min_element(load.begin(), load.end()) - load.begin());
    if (sharded) out[i].owner = slot / tp;
    out[i].tp_owner = slot % tp;
    load[static_cast<std::size_t>(slot)] += work(i);
  }
  return out;
}

MuonSizes muon_sizes(const ParamStore& store, const std::vector<MuonMatrix>& matrices) {
  MuonSizes s;
  const bool sharded = store.sharding().shards_optimizer();
  const MuonTpSplit tp = muon_tp_split(store);
  for (const MuonMatrix& m : matrices) {
    s.largest = std::max(s.largest, m.numel());
    s.square = std::max(s.square, m.small_side() * m.small_side());
    if (!sharded) {
      if (tp.parts > 1) s.boxes = std::max(s.boxes, m.box_numel());
      continue;
    }
    if (m.owner == store.sharding().rank) {
      if (tp.parts > 1) s.boxes += m.box_numel();
      if (m.tp_owner == tp.rank) s.gathered += m.numel();
    }
    const auto [first, last] = store.update_range(m.param, store.sharding().rank);
    s.pieces += last - first;
  }
  if (!sharded) s.gathered = s.largest;
  return s;
}

}  // namespace ustrain
