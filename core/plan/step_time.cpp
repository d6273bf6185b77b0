#include "core/plan/step_time.h"

#include <algorithm>
#include <cstring>

#include "core/distributed/pipeline_plan.h"
#include "core/distributed/process_layout.h"
#include "core/plan/comm_cost.h"
#include "core/plan/step_scratch.h"
#include "core/step/training_step.h"
#include "kernels/error.h"
#include "parallel/mesh.h"
#include "parallel/pipeline_simulation.h"

namespace ustrain {
namespace {

// The spans of rank 0's groups (every rank's look alike: tp fastest, pp slowest).
struct Spans {
  GroupSpan tp, cp, ep, gradients, expert_gradients, embedding, dp_shard, dp_replicate;
  bool pp_across_nodes = false;
};

Spans spans_of(const Recipe& r, int per_node) {
  const MeshShape shape = mesh_shape_of(r);
  const Mesh mesh(shape, 0, shape.world_size());
  Spans s;
  const auto span = [&](std::initializer_list<MeshDim> dims) {
    const std::vector<int> ranks = mesh.group(dims);
    return GroupSpan{static_cast<int>(ranks.size()), spans_nodes(ranks, per_node)};
  };
  s.tp = span({MeshDim::tp});
  s.cp = span({MeshDim::cp});
  s.gradients = span({MeshDim::dp, MeshDim::cp});
  const auto ranks_span = [&](const std::vector<int>& ranks) {
    return GroupSpan{static_cast<int>(ranks.size()), spans_nodes(ranks, per_node)};
  };
  s.ep = ranks_span(mesh.expert_group());
  s.expert_gradients = ranks_span(mesh.expert_gradient_group());
  // Hybrid sharding: a block of consecutive dp ranks (inside a node when it fits there), and
  // the same place in every block (across nodes once the blocks fill them).
  s.dp_shard = ranks_span(mesh.dp_shard_group());
  s.dp_replicate = ranks_span(mesh.dp_replicate_group());
  const std::vector<int> pipeline = mesh.group({MeshDim::pp});
  s.pp_across_nodes = spans_nodes(pipeline, per_node);
  s.embedding = GroupSpan{2, s.pp_across_nodes};
  return s;
}

bool is_backward(ActionKind k) {
  return k == ActionKind::backward || k == ActionKind::backward_input || k == ActionKind::backward_weight;
}

// The part of an action's ring transfers (ring_s) that its attention (attention_s) does not
// hide: comm_cost.h's overlap rule for cp.
double exposed_ring_seconds(ActionKind kind, double ring_s, double attention_s) {
  if (!is_backward(kind)) return std::max(0.0, ring_s - attention_s);
  return ring_s / 2 + std::max(0.0, ring_s / 2 - attention_s);
}

// The reduce-scatters and all-reduces of a volume: the gradient sync's calls (its buckets).
std::int64_t sync_calls(const CommVolume& v) { return v[CommOp::reduce_scatter].calls + v[CommOp::all_reduce].calls; }

// When the group's queue, free at `queue`, has carried the gradient sync of a backward action
// that computes over `span` (start, end): `bucketed_s` in `buckets` calls, each issued as
// backward fills its bucket (evenly over the action), then `replicate_s`, issued at its end.
// The last bucket is sent after the end; the first waits for the queue and its bucket.
double sync_done(double queue, std::pair<double, double> span, double bucketed_s, double replicate_s,
                 std::int64_t buckets) {
  const auto [start, end] = span;
  const double k = static_cast<double>(buckets);
  const double first_ready = start + (end - start) / k;
  return std::max(std::max(queue, first_ready) + bucketed_s, end + bucketed_s / k) + replicate_s;
}

// The recorded pipeline rank whose profile stands for `r`: the first and last differ (the
// embedding, the head and loss), the ones between are alike.
int recorded_rank(int r, int pp) { return r == 0 || r == pp - 1 ? r : 1; }

}  // namespace

StepTimeModel::StepTimeModel(Hardware hw, Calibration cal, int devices_per_node, Device device, int at_once,
                             std::int64_t document_tokens)
    : hw_(std::move(hw)),
      cal_(std::move(cal)),
      per_node_(devices_per_node),
      at_once_(at_once),
      device_(device),
      document_tokens_(document_tokens) {}

double StepTimeModel::op_seconds(const RecordedOp& op) const {
  const auto flops = static_cast<double>(op.flops);
  if (op.op_class == OpClass::gemm && op.flops > 0) return flops / cal_.gemm.rate(flops);
  if (op.op_class == OpClass::attention && op.flops > 0) return flops / cal_.attention.rate(flops);
  return static_cast<double>(op.bytes) / cal_.memory_bytes_per_s;
}

OpsDigest StepTimeModel::digest(const std::vector<RecordedOp>& ops,
                                const std::function<std::size_t(const RecordedOp&)>& scratch_of) const {
  OpsDigest d;
  for (const RecordedOp& op : ops) {
    const double s = op_seconds(op);
    d.seconds += s;
    d.seconds += cal_.op_overhead_s;
    if (op.op_class == OpClass::attention) {
      d.attention_seconds += s;
      d.attention_seconds += cal_.op_overhead_s;
    }
    if (op.op_class == OpClass::gemm || op.op_class == OpClass::attention) d.model_seconds += s + cal_.op_overhead_s;
    if (op.op_class == OpClass::optimizer) d.optimizer_seconds += s + cal_.op_overhead_s;
    if (op.op_class == OpClass::gemm && std::strcmp(op.name, "linear_backward_weight") == 0)
      d.weight_gradient_seconds += s + cal_.op_overhead_s;
    if (op.op_class == OpClass::elementwise && std::strcmp(op.name, "add") != 0)
      d.elementwise_seconds += s + cal_.op_overhead_s;
    if (scratch_of) d.scratch = std::max(d.scratch, scratch_of(op));
  }
  return d;
}

const StepTimeModel::RecordedRank& StepTimeModel::recorded(const Recipe& recipe, int pp_rank) {
  StepRecording step = step_recording(recipe, pp_rank);
  return recorded_.get(step.key, [&] {
    const auto scratch_of = deviceless_scratch_of(recipe);
    const OpsDigester digester = [&](const std::vector<RecordedOp>& ops) { return digest(ops, scratch_of); };
    const RankProfile profile = record_rank_step(step.recipe, pp_rank, device_, &digester, document_tokens_);
    std::size_t scratch = profile.tail_digest.scratch;
    for (const ActionProfile& a : profile.actions) scratch = std::max(scratch, a.digest.scratch);
    return RecordedRank{price_rank(recipe, profile), scratch};
  });
}

std::size_t StepTimeModel::op_scratch(const Recipe& recipe, int pp_rank) {
  // The ranks between the first and the last take the same scratch: the ops that take any
  // (attention, norms' backward, embeddings, the gradient norm) are alike in every layer. On
  // the CPU the widened GEMMs differ between dense and expert layers, so a model that mixes
  // them is recorded rank by rank.
  const ModelSection& m = recipe.model;
  const bool alike = device_ == Device::cuda || m.n_experts == 0 || m.first_dense_layers == 0;
  return recorded(recipe, alike ? recorded_rank(pp_rank, static_cast<int>(recipe.parallel.pp)) : pp_rank).op_scratch;
}

StepTimeModel::PricedRank StepTimeModel::price_rank(const Recipe& recipe, const RankProfile& profile) const {
  PricedRank p;
  const Spans spans = spans_of(recipe, per_node_);
  const bool overlap = recipe.parallel.overlap_comm;
  std::int64_t sends = 0, sent = 0;
  for (const ActionProfile& a : profile.actions) {
    const bool last = a.action.micro == profile.micro_batches - 1;
    const auto key = std::tuple{static_cast<int>(a.action.kind), a.action.chunk, last};
    if (p.actions.count(key)) continue;
    PricedAction c;
    c.compute_s = a.digest.seconds;
    c.tp_s = comm_seconds(a.comm.tp, spans.tp, hw_);
    c.cp_s = exposed_ring_seconds(a.action.kind, comm_seconds(a.comm.cp, spans.cp, hw_),
                                  a.digest.attention_seconds);
    c.ep_s = comm_seconds(a.comm.ep, spans.ep, hw_);
    // Dense and expert gradients travel on their own groups; one queue holds both (an upper bound).
    // Under hybrid sharding ZeRO's traffic runs on dp_shard and dp_replicate instead, in the same queue.
    const double gathers = gather_seconds(a.comm.gradients, spans.gradients, hw_) +
                           gather_seconds(a.comm.expert_gradients, spans.expert_gradients, hw_) +
                           gather_seconds(a.comm.dp_shard, spans.dp_shard, hw_);
    const double sync = comm_seconds(a.comm.gradients, spans.gradients, hw_) +
                        comm_seconds(a.comm.expert_gradients, spans.expert_gradients, hw_) +
                        comm_seconds(a.comm.dp_shard, spans.dp_shard, hw_) +
                        comm_seconds(a.comm.dp_replicate, spans.dp_replicate, hw_) - gathers;
    c.gather_s = overlap ? std::max(0.0, gathers - c.compute_s) : gathers;
    c.async_s = overlap ? sync : 0;
    c.replicate_s = overlap ? comm_seconds(a.comm.dp_replicate, spans.dp_replicate, hw_) : 0;
    c.buckets = std::max<std::int64_t>(1, sync_calls(a.comm.gradients) + sync_calls(a.comm.expert_gradients) +
                                              sync_calls(a.comm.dp_shard));
    c.blocking_s = c.compute_s + c.tp_s + c.cp_s + c.ep_s + c.gather_s + (overlap ? 0 : sync) +
                   comm_seconds(a.comm.embedding, spans.embedding, hw_);
    p.actions[key] = c;
  }
  for (const ActionProfile& a : profile.actions) {
    sends += a.comm.pp.send.calls;
    sent += a.comm.pp.send.payload_bytes;
  }
  p.message_bytes = sends > 0 ? static_cast<double>(sent) / static_cast<double>(sends) : 0;
  p.tail_compute_s = profile.tail_digest.seconds;
  p.tail_optimizer_s = profile.tail_digest.optimizer_seconds;
  p.tail_comm_s = comm_seconds(profile.tail_comm.gradients, spans.gradients, hw_) +
                  comm_seconds(profile.tail_comm.expert_gradients, spans.expert_gradients, hw_) +
                  comm_seconds(profile.tail_comm.tp, spans.tp, hw_) +
                  comm_seconds(profile.tail_comm.embedding, spans.embedding, hw_) +
                  comm_seconds(profile.tail_comm.dp_shard, spans.dp_shard, hw_) +
                  comm_seconds(profile.tail_comm.dp_replicate, spans.dp_replicate, hw_);
  p.tail_sync_s = comm_seconds(profile.tail_comm.gradients, spans.gradients, hw_) +
                  comm_seconds(profile.tail_comm.expert_gradients, spans.expert_gradients, hw_) +
                  comm_seconds(profile.tail_comm.embedding, spans.embedding, hw_) +
                  comm_seconds(profile.tail_comm.dp_shard, spans.dp_shard, hw_) +
                  comm_seconds(profile.tail_comm.dp_replicate, spans.dp_replicate, hw_);
  return p;
}

StageCosts StepTimeModel::stage_costs(const std::vector<const PricedRank*>& ranks, const PipelineProgram& program,
                                      int chunks, double link_bytes_per_s, double latency_s) {
  StageCosts costs(ranks.size(), std::vector<ActionCosts>(static_cast<std::size_t>(chunks)));
  for (std::size_t r = 0; r < ranks.size(); ++r) {
    const PricedRank& pr = *ranks[r];
    for (int c = 0; c < chunks; ++c) {
      ActionCosts& k = costs[r][static_cast<std::size_t>(c)];
      const auto cost = [&](ActionKind kind) {
        auto it = pr.actions.find({static_cast<int>(kind), c, false});
        if (it == pr.actions.end()) it = pr.actions.find({static_cast<int>(kind), c, true});  // one micro-batch
        return it == pr.actions.end() ? 0.0 : it->second.blocking_s;
      };
      k.forward = cost(ActionKind::forward);
      if (program.split_backward) {
        k.backward_input = cost(ActionKind::backward_input);
        k.backward_weight = cost(ActionKind::backward_weight);
      } else {
        k.backward_input = cost(ActionKind::backward);
        k.backward_weight = 0;
      }
      k.transfer = pr.message_bytes > 0 ? pr.message_bytes / link_bytes_per_s + latency_s : 0;
    }
  }
  return costs;
}

StepTime StepTimeModel::rank_time(const PricedRank& pr, const std::vector<PipelineAction>& actions,
                                  const std::vector<std::pair<double, double>>& spans, int micro_batches) {
  StepTime t;
  double queue = 0, extra = 0;
  std::size_t span = 0;
  for (const PipelineAction& a : actions) {
    if (!is_compute(a.kind)) continue;
    ++span;
    const bool last = a.micro == micro_batches - 1;
    auto it = pr.actions.find({static_cast<int>(a.kind), a.chunk, last});
    if (it == pr.actions.end()) it = pr.actions.find({static_cast<int>(a.kind), a.chunk, false});
    USTRAIN_ASSERT(it != pr.actions.end(), "an action the recorded step did not run");
    const PricedAction& c = it->second;
    t.compute_s += c.compute_s;
    t.tp_s += c.tp_s;
    t.cp_s += c.cp_s;
    t.ep_s += c.ep_s;
    t.dp_s += c.blocking_s - c.compute_s - c.tp_s - c.cp_s - c.ep_s;  // exposed gathers, unhidden syncs, tied embeddings
    if (last) {
      // The simulator ran every micro-batch at the regular cost; the last one's backward
      // may cost more (the gradient sync it issues).
      const auto regular = pr.actions.find({static_cast<int>(a.kind), a.chunk, false});
      if (regular != pr.actions.end()) extra += std::max(0.0, c.blocking_s - regular->second.blocking_s);
    }
    if (is_backward(a.kind) && c.async_s > 0)
      queue = sync_done(queue, spans[span - 1], c.async_s - c.replicate_s, c.replicate_s, c.buckets);
  }
  const double last_end = spans.back().second;
  const double sync_wait = std::max(0.0, queue - last_end);
  t.step_s = last_end + extra + sync_wait + pr.tail_compute_s + pr.tail_comm_s;
  t.compute_s += pr.tail_compute_s;
  t.dp_s += sync_wait + pr.tail_comm_s;
  t.bubble_s = std::max(0.0, t.step_s - t.compute_s - t.tp_s - t.cp_s - t.ep_s - t.dp_s);
  return t;
}

StepTime StepTimeModel::predict(const Recipe& recipe) {
  return predict(recipe, make_pipeline_program(parse_pipeline_schedule(recipe.parallel.pp_schedule),
                                               pipeline_shape(recipe, static_cast<int>(recipe.grad_accum_steps()))));
}

StepTime StepTimeModel::predict(const Recipe& recipe, const PipelineProgram& program) {
  const int P = static_cast<int>(recipe.parallel.pp);
  const int V = static_cast<int>(recipe.parallel.virtual_stages);
  const Spans spans = spans_of(recipe, per_node_);
  const double latency = spans.pp_across_nodes ? hw_.inter_node_latency_s : hw_.intra_node_latency_s;
  const double link = kLinkEfficiency * (spans.pp_across_nodes ? hw_.inter_node_bytes_per_s : hw_.intra_node_bytes_per_s);
  std::vector<const PricedRank*> ranks;
  for (int r = 0; r < P; ++r) ranks.push_back(&recorded(recipe, recorded_rank(r, P)).priced);
  const PipelineSimulation sim = simulate_pipeline(program, stage_costs(ranks, program, V, link, latency));
  StepTime best;
  double node_busy = 0;  // every rank's compute and blocking communication, one pipeline's worth
  for (int r = 0; r < P; ++r) {
    StepTime t = rank_time(*ranks[static_cast<std::size_t>(r)], program.ranks[static_cast<std::size_t>(r)],
                           sim.spans[static_cast<std::size_t>(r)], program.shape.micro_batches);
    node_busy += t.compute_s + t.tp_s + t.cp_s + t.ep_s + t.dp_s;
    t.tp_across_nodes = spans.tp.across_nodes;
    t.cp_across_nodes = spans.cp.across_nodes;
    t.ep_across_nodes = spans.ep.across_nodes;
    // Without hybrid sharding dp_shard is the gradients group, and dp_replicate one rank.
    t.dp_across_nodes = spans.dp_shard.across_nodes || spans.dp_replicate.across_nodes;
    t.pp_across_nodes = spans.pp_across_nodes;
    if (t.step_s > best.step_s) best = t;
  }
  const ParallelSection& p = recipe.parallel;
  const auto world = static_cast<int>(p.dp * p.tp * p.pp * p.cp);
  const int on_node = std::min(world, per_node_);
  if (on_node > at_once_) {
    // The node runs on_node / P copies of each pipeline rank, at_once_ ranks at a time.
    const double turns = node_busy * on_node / static_cast<double>(P) / at_once_;
    if (turns > best.step_s) {
      best.bubble_s = 0;  // idle ranks lend their cores: the bubble is spent computing
      best.shared_cores_s = turns - best.compute_s - best.tp_s - best.cp_s - best.ep_s - best.dp_s;
      best.step_s = turns;
    }
  }
  return best;
}

const StepTimeModel::Probe& StepTimeModel::probe(const Recipe& recipe, int layers, bool moe) {
  const StepRecording step = layer_probe_recording(recipe, layers, moe);
  return probes_.get(step.key, [&] {
    const OpsDigester digester = [&](const std::vector<RecordedOp>& ops) { return digest(ops, {}); };
    Probe p;
    for (const ActionProfile& a : record_rank_step(step.recipe, 0, device_, &digester, document_tokens_).actions) {
      if (a.action.micro != 0) continue;  // the last micro-batch's backward also syncs gradients
      ProbeAction& k = a.action.kind == ActionKind::forward ? p.forward : p.backward;
      k = {a.digest.model_seconds, a.digest.weight_gradient_seconds, a.digest.elementwise_seconds,
           a.digest.attention_seconds, a.comm.tp, a.comm.cp, a.comm.ep};
    }
    return p;
  });
}

const StepTimeModel::PricedRank& StepTimeModel::sync_rank(const Recipe& recipe, int pp_rank) {
  const StepRecording step = sync_step_recording(recipe, pp_rank);
  return syncs_.get(step.key, [&] {
    const OpsDigester digester = [&](const std::vector<RecordedOp>& ops) { return digest(ops, {}); };
    return price_rank(step.recipe, record_rank_step(step.recipe, pp_rank, device_, &digester, document_tokens_));
  });
}

StageCosts StepTimeModel::bound_costs(const Recipe& recipe, bool split_backward) {
  const int P = static_cast<int>(recipe.parallel.pp);
  const Spans spans = spans_of(recipe, per_node_);
  // A layer's costs, the least of the model's layer kinds (dense, mixture of experts): a probe
  // of two layers less one of one layer. Their attention and ring transfers are alike. The
  // head's, the probe of one layer less that layer: its GEMMs alone, since the probe's other
  // ops are the embedding's too.
  struct LayerCosts {
    double forward = 0, backward = 0, backward_input = 0, backward_weight = 0, head_forward = 0, head_backward = 0;
  };
  LayerCosts layer;
  double ring_forward = 0, ring_backward = 0, attention_forward = 0, attention_backward = 0;
  const ModelGeometry whole = geometry_of(recipe, 0, 0);
  const bool full = recipe.train.recompute == "full";
  bool first = true;
  for (const bool moe : {false, true}) {
    bool present = false;
    for (int l = 0; l < whole.n_layers && !present; ++l) present = whole.moe_layer(l) == moe;
    if (!present) continue;
    const Probe& one = probe(recipe, 1, moe);
    const Probe& two = probe(recipe, 2, moe);
    const auto less = [](ProbeAction a, const ProbeAction& b) {
      a.model_s -= b.model_s;
      a.weight_s -= b.weight_s;
      a.elementwise_s -= b.elementwise_s;
      a.attention_s -= b.attention_s;
      a.tp -= b.tp;
      a.cp -= b.cp;
      a.ep -= b.ep;
      return a;
    };
    const ProbeAction f = less(two.forward, one.forward), b = less(two.backward, one.backward);
    const double forward =
        f.model_s + f.elementwise_s + comm_seconds(f.tp, spans.tp, hw_) + comm_seconds(f.ep, spans.ep, hw_);
    // Full recompute runs each block's forward again at the start of its backward.
    const double again = full ? forward : 0, again_math = full ? f.model_s : 0;
    const LayerCosts c{forward,
                       again + b.model_s + b.elementwise_s + comm_seconds(b.tp, spans.tp, hw_) +
                           comm_seconds(b.ep, spans.ep, hw_),
                       again_math + b.model_s - b.weight_s,
                       b.weight_s,
                       one.forward.model_s - f.model_s,
                       one.backward.model_s - b.model_s};
    const double rf = comm_seconds(f.cp, spans.cp, hw_), rb = (full ? rf : 0) + comm_seconds(b.cp, spans.cp, hw_);
    const double attention_b = (full ? f.attention_s : 0) + b.attention_s;
    if (first) {
      layer = c;
      ring_forward = rf, ring_backward = rb, attention_forward = f.attention_s, attention_backward = attention_b;
      first = false;
      continue;
    }
    layer = {std::min(layer.forward, c.forward), std::min(layer.backward, c.backward),
             std::min(layer.backward_input, c.backward_input), std::min(layer.backward_weight, c.backward_weight),
             std::min(layer.head_forward, c.head_forward), std::min(layer.head_backward, c.head_backward)};
    // The exposed ring grows with the transfers and shrinks with the attention hiding them.
    ring_forward = std::min(ring_forward, rf), ring_backward = std::min(ring_backward, rb);
    attention_forward = std::max(attention_forward, f.attention_s);
    attention_backward = std::max(attention_backward, attention_b);
  }
  const double latency = spans.pp_across_nodes ? hw_.inter_node_latency_s : hw_.intra_node_latency_s;
  StageCosts costs(static_cast<std::size_t>(P));
  for (int r = 0; r < P; ++r) {
    for (const ChunkSpan& chunk : geometry_of(recipe, 0, r).chunks) {
      const double n = chunk.end_layer - chunk.first_layer;
      ActionCosts k;
      k.forward = n * layer.forward +
                  exposed_ring_seconds(ActionKind::forward, n * ring_forward, n * attention_forward) +
                  (chunk.head ? std::max(0.0, layer.head_forward) : 0);
      if (split_backward) {  // the transfers and the head's share of B and W are left out
        k.backward_input = n * std::max(0.0, layer.backward_input);
        k.backward_weight = n * std::max(0.0, layer.backward_weight);
      } else {
        k.backward_input = n * layer.backward +
                           exposed_ring_seconds(ActionKind::backward, n * ring_backward, n * attention_backward) +
                           (chunk.head ? std::max(0.0, layer.head_backward) : 0);
        k.backward_weight = 0;
      }
      k.transfer = P > 1 ? latency : 0;  // the activation's bytes left out
      costs[static_cast<std::size_t>(r)].push_back(k);
    }
  }
  return costs;
}

double StepTimeModel::busy_lower_bound(const Recipe& recipe) {
  const bool split = parse_pipeline_schedule(recipe.parallel.pp_schedule) == PipelineSchedule::zero_bubble;
  const auto micro_batches = static_cast<double>(recipe.grad_accum_steps());
  double bound = 0;
  for (const std::vector<ActionCosts>& rank : bound_costs(recipe, split)) {
    double per_micro_batch = 0;  // every chunk's forward and backward, one micro-batch's
    for (const ActionCosts& c : rank) per_micro_batch += c.forward + c.backward_input + c.backward_weight;
    bound = std::max(bound, micro_batches * per_micro_batch);
  }
  return bound;
}

double StepTimeModel::step_lower_bound(const Recipe& recipe, const PipelineProgram& program) {
  const int P = static_cast<int>(recipe.parallel.pp);
  const StageCosts costs = bound_costs(recipe, program.split_backward);
  // As rank_time: each rank's step lasts to the end of its last compute action or of its
  // gradient sync, then its optimizer and the traffic after the schedule; every span here
  // ends no later than predict's.
  const PipelineSimulation sim = simulate_pipeline(program, costs);
  double bound = 0;
  for (int r = 0; r < P; ++r) {
    const auto& rank_spans = sim.spans[static_cast<std::size_t>(r)];
    if (rank_spans.empty()) continue;
    const PricedRank& sync = sync_rank(recipe, recorded_rank(r, P));
    double queue = 0;
    std::size_t span = 0;
    for (const PipelineAction& a : program.ranks[static_cast<std::size_t>(r)]) {
      if (!is_compute(a.kind)) continue;
      ++span;
      const bool last = a.micro == program.shape.micro_batches - 1;
      auto it = sync.actions.find({static_cast<int>(a.kind), a.chunk, last});
      if (it == sync.actions.end()) it = sync.actions.find({static_cast<int>(a.kind), a.chunk, false});
      if (it == sync.actions.end()) continue;
      const PricedAction& c = it->second;
      if (is_backward(a.kind) && c.async_s > 0)
        queue = sync_done(queue, rank_spans[span - 1], c.async_s - c.replicate_s, c.replicate_s, c.buckets);
    }
    bound = std::max(bound, std::max(rank_spans.back().second, queue) + sync.tail_optimizer_s + sync.tail_sync_s);
  }
  return bound;
}

}  // namespace ustrain
