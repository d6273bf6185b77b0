#include "core/distributed/muon_optimizer.h"

#include <cmath>
#include <cstddef>
#include <string>

namespace ustrain {
namespace {

std::string plan_name(const ParamStore& store, const std::string& what) {
  return store.group() == SyncGroup::dense ? what : std::string(sync_group_name(store.group())) + "." + what;
}

int find_entry(const MemoryPlan& plan, const std::string& name) {
  for (std::size_t i = 0; i < plan.entries().size(); ++i)
    if (plan.entries()[i].name == name) return static_cast<int>(i);
  return -1;
}

// Floats [begin, begin + n) of `t`, flat (no memory before the plan is bound: null data).
Tensor floats(const Tensor& t, std::int64_t begin, std::int64_t n) {
  char* data = t.data ? static_cast<char*>(t.data) + begin * static_cast<std::int64_t>(sizeof(float)) : nullptr;
  return Tensor(data, Shape{n}, DType::f32, t.device);
}

// Moves every matrix's parts between the ranks that hold them (`slot`: this rank's part of
// matrix i, or empty) and its owner (`whole`: matrix i when this rank owns it): to the owners
// (`to_owner`), or back.
void exchange_parts(const ParamStore& store, Communicator& group, Backend& backend,
                    const std::vector<MuonMatrix>& matrices, const std::vector<Tensor>& slot,
                    const std::vector<Tensor>& whole, bool to_owner) {
  const int me = store.sharding().rank;
  USTRAIN_ASSERT(group.size() == store.sharding().parts && group.rank() == me, "Muon's group is not the store's");
  const auto give = to_owner ? PeerTransfer::Kind::send : PeerTransfer::Kind::recv;
  const auto take = to_owner ? PeerTransfer::Kind::recv : PeerTransfer::Kind::send;
  std::vector<PeerTransfer> transfers;
  for (std::size_t i = 0; i < matrices.size(); ++i) {
    const MuonMatrix& m = matrices[i];
    if (m.owner != me) {
      if (!slot[i].empty()) transfers.push_back({give, slot[i], m.owner, 0});
      continue;
    }
    for (int r = 0; r < store.sharding().parts; ++r) {
      const auto [first, last] = store.update_range(m.param, r);
      if (first >= last) continue;
      const Tensor part = floats(whole[i], first, last - first);
      if (r != me) transfers.push_back({take, part, r, 0});
      else if (to_owner) backend.copy(part, slot[i]);
      else backend.copy(slot[i], part);
    }
  }
  backend.synchronize();  // the parts are written before they leave
  std::vector<Work> works = group.exchange(transfers);
  wait_all(works);
}

}  // namespace

void plan_muon(const ModelParams& params, MemoryPlan& plan) {
  for (const auto& store : params.stores()) {
    const std::vector<MuonMatrix> matrices = muon_matrices(*store);
    if (matrices.empty()) continue;
    const MuonSizes s = muon_sizes(*store, matrices);
    plan.add(plan_name(*store, "muon.gathered"), MemCategory::communication, Shape{std::max<std::int64_t>(s.gathered, 1)});
    if (store->sharding().shards_optimizer())
      plan.add(plan_name(*store, "muon.pieces"), MemCategory::communication, Shape{std::max<std::int64_t>(s.pieces, 1)});
    plan.add(plan_name(*store, "muon.workspace"), MemCategory::optimizer, Shape{s.largest + 2 * s.square});
  }
}

Muon::Muon(const OptimSection& o, Backend& backend, const ModelParams& params, const PlannedMemory& memory)
    : optim_(o), backend_(backend), adamw_(o, backend) {
  const MemoryPlan& plan = memory.plan();
  for (const auto& store : params.stores()) {
    const std::vector<MuonMatrix> matrices = muon_matrices(*store);
    if (matrices.empty()) continue;
    const MuonSizes s = muon_sizes(*store, matrices);
    const int gathered = find_entry(plan, plan_name(*store, "muon.gathered"));
    const int pieces = find_entry(plan, plan_name(*store, "muon.pieces"));
    const int workspace = find_entry(plan, plan_name(*store, "muon.workspace"));
    USTRAIN_ASSERT(gathered >= 0 && workspace >= 0, "Muon's memory is not in the plan");
    const Tensor w = memory.tensor(workspace);
    memory_[store.get()] = {memory.tensor(gathered), pieces >= 0 ? memory.tensor(pieces) : Tensor(),
                            {floats(w, s.largest, s.square), floats(w, s.largest + s.square, s.square),
                             floats(w, 0, s.largest)}};
  }
}

void Muon::update(const ParamStore& store, Communicator& group, const OptimizerStep& s) {
  std::vector<AdamWTensors> rest;
  Pieces mine;
  for (const OptimizerPiece& p : store.optimizer_pieces()) {
    const ParamSpec& spec = store.registry().spec(p.param);
    if (muon_updates(spec)) mine.emplace(p.param, p);
    else rest.push_back({p.value, p.grad, p.m, p.v, spec.decay ? static_cast<float>(optim_.weight_decay) : 0.0f,
                         p.compute_copy});
  }
  adamw_.update_ranges(rest, s);
  const std::vector<MuonMatrix> matrices = muon_matrices(store);
  if (matrices.empty()) return;
  const StoreMemory& mem = memory_.at(&store);
  if (store.sharding().shards_optimizer()) update_gathered(store, group, matrices, mine, mem, s);
  else update_local(matrices, mine, mem, s);
}

void Muon::update_local(const std::vector<MuonMatrix>& matrices, const Pieces& mine, const StoreMemory& mem,
                        const OptimizerStep& s) {
  for (const MuonMatrix& m : matrices) {
    const OptimizerPiece& p = mine.at(m.param);  // the whole matrix
    const Tensor x = floats(mem.gathered, 0, m.numel());
    momentum(p, x, mem.scratch.y, s);
    newton_schulz(backend_, x, m.rows, m.cols, static_cast<int>(optim_.muon_ns_steps), mem.scratch);
    apply(p, x, m, s);
  }
}

void Muon::update_gathered(const ParamStore& store, Communicator& group, const std::vector<MuonMatrix>& matrices,
                           const Pieces& mine, const StoreMemory& mem, const OptimizerStep& s) {
  std::vector<Tensor> slot(matrices.size()), whole(matrices.size());
  std::int64_t slot_at = 0, whole_at = 0;
  for (std::size_t i = 0; i < matrices.size(); ++i) {
    const MuonMatrix& m = matrices[i];
    if (const auto it = mine.find(m.param); it != mine.end()) {
      const OptimizerPiece& p = it->second;
      slot[i] = floats(mem.pieces, slot_at, p.end - p.begin);
      slot_at += p.end - p.begin;
      momentum(p, slot[i], mem.scratch.y, s);
    }
    if (m.owner == store.sharding().rank) {
      whole[i] = floats(mem.gathered, whole_at, m.numel());
      whole_at += m.numel();
    }
  }
  exchange_parts(store, group, backend_, matrices, slot, whole, /*to_owner=*/true);
  for (std::size_t i = 0; i < matrices.size(); ++i)
    if (!whole[i].empty())
      newton_schulz(backend_, whole[i], matrices[i].rows, matrices[i].cols, static_cast<int>(optim_.muon_ns_steps),
                    mem.scratch);
  exchange_parts(store, group, backend_, matrices, slot, whole, /*to_owner=*/false);
  for (std::size_t i = 0; i < matrices.size(); ++i)
    if (!slot[i].empty()) apply(mine.at(matrices[i].param), slot[i], matrices[i], s);
}

void Muon::momentum(const OptimizerPiece& p, Tensor u, Tensor tmp, const OptimizerStep& s) {
  const auto mu = static_cast<float>(optim_.muon_momentum);
  const std::int64_t n = p.end - p.begin;
  u = floats(u, 0, n);
  backend_.copy(u, p.grad);
  backend_.scale(u, s.grad_scale);  // u = G (scaled)
  backend_.scale(p.m, mu);
  backend_.add(p.m, p.m, u);  // M = mu M + G
  if (!optim_.muon_nesterov) {
    backend_.copy(u, p.m);
    return;
  }
  const Tensor mu_m = floats(tmp, 0, n);
  backend_.copy(mu_m, p.m);
  backend_.scale(mu_m, mu);
  backend_.add(u, u, mu_m);  // U = G + mu M
}

void Muon::apply(const OptimizerPiece& p, Tensor x, const MuonMatrix& m, const OptimizerStep& s) {
  const double lr = s.lr;
  const double shape_scale = 0.2 * std::sqrt(static_cast<double>(std::max(m.rows, m.cols)));
  x = floats(x, 0, p.end - p.begin);
  backend_.scale(x, static_cast<float>(-lr * shape_scale));
  backend_.scale(p.value, static_cast<float>(1.0 - lr * optim_.weight_decay));
  backend_.add(p.value, p.value, x);  // W <- W - lr (0.2 sqrt(max(m, n)) X + wd W)
  if (!p.compute_copy.empty()) backend_.convert(p.compute_copy, p.value);
}

}  // namespace ustrain
