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

std::vector<MuonMatrix> muon_matrices(const ParamStore& store) {
  std::vector<MuonMatrix> out;
  const ParamRegistry& registry = store.registry();
  for (const ParamUnit& unit : store.units())
    for (int p : unit.params)
      if (const ParamSpec& s = registry.spec(p); muon_updates(s))
        out.push_back({p, s.local[0], s.local[1], store.sharding().rank});
  if (!store.sharding().shards_optimizer()) return out;
  // Work of one matrix: the GEMMs of an iteration, about k * numel multiply-adds.
  std::vector<std::size_t> order(out.size());
  std::iota(order.begin(), order.end(), 0);
  const auto work = [&](std::size_t i) { return out[i].small_side() * out[i].numel(); };
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return work(a) > work(b); });
  std::vector<std::int64_t> load(static_cast<std::size_t>(store.sharding().parts), 0);
  for (std::size_t i : order) {
    const auto least = std::min_element(load.begin(), load.end()) - load.begin();
    out[i].owner = static_cast<int>(least);
    load[static_cast<std::size_t>(least)] += work(i);
  }
  return out;
}

MuonSizes muon_sizes(const ParamStore& store, const std::vector<MuonMatrix>& matrices) {
  MuonSizes s;
  const bool sharded = store.sharding().shards_optimizer();
  for (const MuonMatrix& m : matrices) {
    s.largest = std::max(s.largest, m.numel());
    s.square = std::max(s.square, m.small_side() * m.small_side());
    if (!sharded) continue;
    if (m.owner == store.sharding().rank) s.gathered += m.numel();
    const auto [first, last] = store.update_range(m.param, store.sharding().rank);
    s.pieces += last - first;
  }
  if (!sharded) s.gathered = s.largest;
  return s;
}

}  // namespace ustrain
