#include "core/distributed/muon_optimizer.h"

#include <cmath>
#include <cstddef>
#include <string>

#include "core/distributed/muon_tensor_parallel.h"

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

// Moves every matrix's chunks between the ranks of the sync group that hold them (`slot`:
// this rank's chunk of matrix i's box, or empty) and its box owner (`box`: the box of matrix i
// when this rank owns it): to the owners (`to_owner`), or back.
void exchange_parts(const ParamStore& store, Communicator& group, Backend& backend,
                    const std::vector<MuonMatrix>& matrices, const std::vector<Tensor>& slot,
                    const std::vector<Tensor>& box, bool to_owner) {
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
      const Tensor part = float_range(box[i], first, last - first);
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
    if (s.boxes > 0) plan.add(plan_name(*store, "muon.boxes"), MemCategory::communication, Shape{s.boxes});
    plan.add(plan_name(*store, "muon.workspace"), MemCategory::optimizer, Shape{s.largest + 2 * s.square});
  }
}

Muon::Muon(const OptimSection& o, Backend& backend, const ModelParams& params, const PlannedMemory& memory,
           Communicator* tp)
    : optim_(o), backend_(backend), tp_(tp), adamw_(o, backend) {
  const MemoryPlan& plan = memory.plan();
  for (const auto& store : params.stores()) {
    const std::vector<MuonMatrix> matrices = muon_matrices(*store);
    if (matrices.empty()) continue;
    const MuonSizes s = muon_sizes(*store, matrices);
    const int gathered = find_entry(plan, plan_name(*store, "muon.gathered"));
    const int pieces = find_entry(plan, plan_name(*store, "muon.pieces"));
    const int boxes = find_entry(plan, plan_name(*store, "muon.boxes"));
    const int workspace = find_entry(plan, plan_name(*store, "muon.workspace"));
    USTRAIN_ASSERT(gathered >= 0 && workspace >= 0, "Muon's memory is not in the plan");
    USTRAIN_ASSERT((tp_ ? tp_->size() : 1) == muon_tp_split(*store).parts, "Muon's tp group is not the matrices'");
    const Tensor w = memory.tensor(workspace);
    memory_[store.get()] = {memory.tensor(gathered), pieces >= 0 ? memory.tensor(pieces) : Tensor(),
                            boxes >= 0 ? memory.tensor(boxes) : Tensor(),
                            {float_range(w, s.largest, s.square), float_range(w, s.largest + s.square, s.square),
                             float_range(w, 0, s.largest)}};
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
    const OptimizerPiece& p = mine.at(m.param);  // this rank's whole box
    const Tensor whole = float_range(mem.gathered, 0, m.numel());
    const Tensor box = mem.boxes.empty() ? whole : float_range(mem.boxes, 0, m.box_numel());
    momentum(p, box, mem.scratch.y, s);
    move(m, box, whole, mem, /*to_owner=*/true);
    if (mem.boxes.empty() || tp_->rank() == m.tp_owner)
      newton_schulz(backend_, whole, m.rows, m.cols, static_cast<int>(optim_.muon_ns_steps), mem.scratch);
    move(m, box, whole, mem, /*to_owner=*/false);
    apply(p, box, m, s);
  }
}

void Muon::update_gathered(const ParamStore& store, Communicator& group, const std::vector<MuonMatrix>& matrices,
                           const Pieces& mine, const StoreMemory& mem, const OptimizerStep& s) {
  std::vector<Tensor> slot(matrices.size()), box(matrices.size()), whole(matrices.size());
  std::int64_t slot_at = 0, box_at = 0, whole_at = 0;
  const int tp_rank = tp_ ? tp_->rank() : 0;
  for (std::size_t i = 0; i < matrices.size(); ++i) {
    const MuonMatrix& m = matrices[i];
    if (const auto it = mine.find(m.param); it != mine.end()) {
      const OptimizerPiece& p = it->second;
      slot[i] = float_range(mem.pieces, slot_at, p.end - p.begin);
      slot_at += p.end - p.begin;
      momentum(p, slot[i], mem.scratch.y, s);
    }
    if (m.owner != store.sharding().rank) continue;
    if (m.tp_owner == tp_rank) {
      whole[i] = float_range(mem.gathered, whole_at, m.numel());
      whole_at += m.numel();
    }
    if (mem.boxes.empty()) {
      box[i] = whole[i];  // no tp: the box is the matrix
    } else {
      box[i] = float_range(mem.boxes, box_at, m.box_numel());
      box_at += m.box_numel();
    }
  }
  exchange_parts(store, group, backend_, matrices, slot, box, /*to_owner=*/true);
  for (std::size_t i = 0; i < matrices.size(); ++i)
    if (!box[i].empty()) move(matrices[i], box[i], whole[i], mem, /*to_owner=*/true);
  for (std::size_t i = 0; i < matrices.size(); ++i)
    if (!whole[i].empty())
      newton_schulz(backend_, whole[i], matrices[i].rows, matrices[i].cols, static_cast<int>(optim_.muon_ns_steps),
                    mem.scratch);
  for (std::size_t i = 0; i < matrices.size(); ++i)
    if (!box[i].empty()) move(matrices[i], box[i], whole[i], mem, /*to_owner=*/false);
  exchange_parts(store, group, backend_, matrices, slot, box, /*to_owner=*/false);
  for (std::size_t i = 0; i < matrices.size(); ++i)
    if (!slot[i].empty()) apply(mine.at(matrices[i].param), slot[i], matrices[i], s);
}

void Muon::move(const MuonMatrix& m, const Tensor& box, const Tensor& whole, const StoreMemory& mem, bool to_owner) {
  if (mem.boxes.empty()) return;  // no tp
  move_boxes(*tp_, backend_, m, box, whole, mem.scratch.y, to_owner);
}

void Muon::momentum(const OptimizerPiece& p, Tensor u, Tensor tmp, const OptimizerStep& s) {
  const auto mu = static_cast<float>(optim_.muon_momentum);
  const std::int64_t n = p.end - p.begin;
  u = float_range(u, 0, n);
  backend_.copy(u, p.grad);
  backend_.scale(u, s.grad_scale);  // u = G (scaled)
  backend_.scale(p.m, mu);
  backend_.add(p.m, p.m, u);  // M = mu M + G
  if (!optim_.muon_nesterov) {
    backend_.copy(u, p.m);
    return;
  }
  const Tensor mu_m = float_range(tmp, 0, n);
  backend_.copy(mu_m, p.m);
  backend_.scale(mu_m, mu);
  backend_.add(u, u, mu_m);  // U = G + mu M
}

void Muon::apply(const OptimizerPiece& p, Tensor x, const MuonMatrix& m, const OptimizerStep& s) {
  const double lr = s.lr;
  const double shape_scale = 0.2 * std::sqrt(static_cast<double>(std::max(m.rows, m.cols)));
  x = float_range(x, 0, p.end - p.begin);
  backend_.scale(x, static_cast<float>(-lr * shape_scale));
  backend_.scale(p.value, static_cast<float>(1.0 - lr * optim_.weight_decay));
  backend_.add(p.value, p.value, x);  // W <- W - lr (0.2 sqrt(max(m, n)) X + wd W)
  if (!p.compute_copy.empty()) backend_.convert(p.compute_copy, p.value);
}

}  // namespace ustrain
