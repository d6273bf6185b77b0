#include "core/model/llama.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <utility>

#include "core/model/rope_frequencies.h"

namespace ustrain {

LlamaModel::LlamaModel(const ModelSection& cfg, std::int64_t max_batch, std::int64_t max_seq, Recompute policy,
                       DType compute)
    : LlamaModel(cfg, ModelGeometry::of(cfg, {}, max_seq), max_batch, policy, compute) {}

LlamaModel::LlamaModel(const ModelSection& cfg, const ModelGeometry& geometry, std::int64_t max_batch,
                       Recompute policy, DType compute, std::optional<LayerParallel> parallel)
    : cfg_(cfg),
      geo_(geometry),
      par_(parallel ? *parallel : LayerParallel{no_tp_, no_cp_, no_ep_}),
      max_batch_(max_batch),
      policy_(policy),
      compute_(compute) {
  // A model planned for a parallel rank but given no groups can be planned (--dry-run), not
  // run: forward checks.
  const TensorParallel& tp = par_.tp;
  const ExpertDispatcher& ep = par_.ep;
  USTRAIN_ASSERT(!parallel || (tp.size() == geo_.tp && tp.rank() == geo_.tp_rank &&
                               tp.sequence_parallel() == geo_.sequence_parallel()),
                 "the tensor-parallel group does not match the model's geometry");
  USTRAIN_ASSERT(!parallel || (par_.cp.size() == geo_.context.size && par_.cp.rank() == geo_.context.rank),
                 "the context-parallel group does not match the model's geometry");
  USTRAIN_ASSERT(!parallel || (ep.members() == geo_.ep && ep.placement().member == geo_.ep_rank &&
                               (geo_.ep == 1 || ep.placement().n_experts == geo_.n_experts)),
                 "the expert-parallel group does not match the model's geometry");
  const std::int64_t v = geo_.vocab, d = geo_.d_model;
  bool holds_first = false, holds_last = false;
  int layers = 0;
  for (const ChunkSpan& c : geo_.chunks) {
    holds_first |= c.embedding;
    holds_last |= c.head;
    layers += c.end_layer - c.first_layer;
  }
  ChunkParams p;
  if (holds_first) p.embed = params_.registry().declare({"model.embed_tokens.weight", Shape{v, d}, true, false, cfg.init_std,
                                                          UnitId::embedding()});
  blocks_.reserve(static_cast<std::size_t>(layers));  // chunks point into it
  std::vector<std::vector<const TransformerBlock*>> chunk_blocks;
  for (const ChunkSpan& c : geo_.chunks) {
    chunk_blocks.emplace_back();
    for (int l = c.first_layer; l < c.end_layer; ++l) {
      blocks_.emplace_back(l, UnitId::layer(l), cfg, geo_, params_.registry());
      chunk_blocks.back().push_back(&blocks_.back());
    }
  }
  if (holds_last) {
    p.final_norm = params_.registry().declare({"model.norm.weight", Shape{d}, false, false, 0.0, UnitId::head()});
    if (!cfg.tied_embeddings)
      p.head = params_.registry().declare({"lm_head.weight", Shape{v, d}, true, false, cfg.init_std, UnitId::head()});
    else if (holds_first)
      p.head = p.embed;
    else  // the last stage's copy of the first stage's embedding, in a unit of its own
      p.head = params_.registry().declare(
          {"model.embed_tokens.weight", Shape{v, d}, true, false, cfg.init_std, UnitId::tied_head()});
  }
  // A rank that holds part of the model (a pipeline stage, an ep block of experts) lists all of it.
  if (!holds_first || !holds_last || geo_.ep > 1) params_.registry().set_whole_model([cfg] { return declaration(cfg); });
  moe_loads_.reserve(blocks_.size());  // the chunks point into it
  std::map<const TransformerBlock*, MoeLoad*> load_of;
  for (const TransformerBlock& b : blocks_)
    if (std::optional<MoeLoad> empty = b.mlp().empty_load()) load_of[&b] = &moe_loads_.emplace_back(std::move(*empty));
  for (std::size_t c = 0; c < geo_.chunks.size(); ++c) {
    std::vector<MoeLoad*> loads;
    for (const TransformerBlock* b : chunk_blocks[c]) loads.push_back(load_of.contains(b) ? load_of.at(b) : nullptr);
    chunks_.push_back(std::make_unique<ModelChunk>(cfg_, geo_, geo_.chunks[c], chunk_blocks[c], std::move(loads), p,
                                                   params_.registry(), par_, policy_, compute_, hooks_));
  }
}

std::vector<ParamDecl> LlamaModel::declaration(const ModelSection& cfg) {
  const LlamaModel whole(cfg, 1, 1, Recompute::none);
  return {whole.params().specs().begin(), whole.params().specs().end()};
}

std::vector<ParamDecl> LlamaModel::state_declaration(const ModelSection& cfg) {
  LlamaModel whole(cfg, 1, 1, Recompute::none);
  std::vector<ParamDecl> decls;
  for (const RouterBias* b : std::as_const(whole).router_biases())
    decls.push_back({b->name, Shape{static_cast<std::int64_t>(b->values.size())}, false, false, 0.0, UnitId::layer(b->layer)});
  return decls;
}

void LlamaModel::plan(MemoryPlan& plan, const ParamShardings& sharding, const SlotPlan& slots) {
  params_.plan(plan, sharding, compute_);
  USTRAIN_ASSERT(geo_.seq >= 1, "a model plans for sequences of at least one token");
  const std::int64_t n = geo_.tokens(max_batch_), r = geo_.rows(n), d = geo_.d_model, dh = geo_.head_dim;
  const auto work = MemCategory::workspace;
  const DType c = compute_;
  rope_cos_ = plan.add("rope.cos", MemCategory::activations, Shape{geo_.seq, dh / 2});
  rope_sin_ = plan.add("rope.sin", MemCategory::activations, Shape{geo_.seq, dh / 2});
  branch_ = plan.add("branch_out", work, Shape{n, d}, c);
  d_resid_ = plan.add("grad.residual", work, Shape{r, d}, c);
  d_branch_ = plan.add("grad.branch", work, Shape{r, d}, c);
  d_norm_ = plan.add("grad.norm_out", work, Shape{r, d}, c);
  // The sub-layers' gradient workspace, shared by every layer (the blocks of a rank are alike;
  // the geometry gives each rank at least one).
  const auto workspace = [&](const std::vector<ActivationSpec>& specs) {
    std::vector<int> handles;
    for (const ActivationSpec& a : specs) handles.push_back(plan.add(a.name, work, a.shape, a.dtype));
    return handles;
  };
  attention_workspace_ = workspace(blocks_.front().attention().workspace(max_batch_, c));
  mlp_workspace_.clear();  // one list per kind of MLP among the rank's blocks
  for (const TransformerBlock& b : blocks_)
    if (!mlp_workspace_.contains(b.mlp().kind()))
      mlp_workspace_[b.mlp().kind()] = workspace(b.mlp().workspace(max_batch_, c));
  sp_gathered_ = sp_d_full_ = -1;
  if (geo_.sequence_parallel()) {
    sp_gathered_ = plan.add("sequence_parallel.gathered", work, Shape{n, d}, c);
    sp_d_full_ = plan.add("sequence_parallel.grad_full", work, Shape{n, d}, c);
  }
  kept_losses_ = -1;
  if (std::any_of(geo_.chunks.begin(), geo_.chunks.end(), [](const ChunkSpan& c) { return c.head; }))
    kept_losses_ = plan.add("losses", MemCategory::activations, Shape{std::max(1, slots.kept_losses), n});
  for (std::size_t k = 0; k < chunks_.size(); ++k) {
    const int chunk_slots = slots.slots.empty() ? 1 : slots.slots.at(k);
    const int receive = slots.receive_buffers.empty() ? 0 : slots.receive_buffers.at(k);
    chunks_[k]->plan(plan, max_batch_, chunk_slots, receive, slots.split_backward);
  }
}

void LlamaModel::bind(const PlannedMemory& mem, Backend& backend) {
  params_.bind(mem);
  const RopeTables rope{mem.tensor(rope_cos_), mem.tensor(rope_sin_)};
  // One table per run of the sequence this rank holds, at the run's true positions.
  const std::vector<double> inv_freq = rope_inverse_frequencies(cfg_, geo_.head_dim);
  std::int64_t row = 0;
  for (const SeqRange& run : geo_.positions()) {
    if (run.count == 0) continue;
    backend.rope_tables(rope.cos.slice(row, row + run.count), rope.sin.slice(row, row + run.count), inv_freq,
                        run.begin);
    row += run.count;
  }
  const auto at = [&](int handle) { return handle >= 0 ? mem.tensor(handle) : Tensor(); };
  const auto all = [&](const std::vector<int>& handles) {
    std::vector<Tensor> t;
    for (int h : handles) t.push_back(mem.tensor(h));
    return t;
  };
  SharedScratch scratch{
      BlockScratch{at(d_resid_), at(d_branch_), at(d_norm_), at(branch_), at(sp_gathered_), at(sp_d_full_)},
      all(attention_workspace_), {}};
  for (const auto& [kind, handles] : mlp_workspace_) scratch.mlp[kind] = all(handles);
  for (auto& c : chunks_) c->bind(mem, scratch, rope);
  kept_losses_view_ = at(kept_losses_);
}

double LlamaModel::forward(Backend& be, const TokenBatch& tokens, std::int64_t B, std::int64_t S) {
  USTRAIN_ASSERT(chunks_.size() == 1 && chunks_[0]->span().embedding && chunks_[0]->span().head,
                 "forward of the whole model on a rank that holds only part of it");
  USTRAIN_ASSERT(B >= 1 && S >= 1 && B <= max_batch_ && S <= geo_.seq, "batch larger than planned");
  USTRAIN_ASSERT(par_.tp.size() == geo_.tp, "a tensor-parallel model runs only with its tensor-parallel group");
  const std::int64_t n = B * S;
  const Tensor losses(kept_losses_view_.data, Shape{n}, DType::f32, kept_losses_view_.device);  // (N)
  chunks_[0]->forward(be, 0, B, S, tokens, Tensor(), losses);
  std::vector<float> host(static_cast<std::size_t>(n));
  be.copy(Tensor(host.data(), Shape{n}), losses);
  double sum = 0;
  for (float x : host) sum += x;
  return sum;
}

Tensor LlamaModel::decode(Backend& be, KvCache& cache, const std::int32_t* ids, std::int64_t count) {
  USTRAIN_ASSERT(chunks_.size() == 1 && chunks_[0]->span().embedding && chunks_[0]->span().head && geo_.tp == 1 &&
                     geo_.context.size == 1 && geo_.ep == 1,
                 "decoding runs the whole model on one rank");
  return chunks_[0]->decode(be, cache, ids, count);
}

void LlamaModel::backward(Backend& be, float dloss) {
  USTRAIN_ASSERT(chunks_.size() == 1, "backward of the whole model on a rank that holds only part of it");
  chunks_[0]->backward(be, 0, Tensor(), dloss);
}

Tensor LlamaModel::logits() const { return chunks_.back()->logits(); }

std::vector<const MoeLoad*> LlamaModel::moe_loads() const {
  std::vector<const MoeLoad*> loads;
  for (const MoeLoad& load : moe_loads_) loads.push_back(&load);
  return loads;
}

std::vector<RouterBias*> LlamaModel::router_biases() {
  std::vector<RouterBias*> biases;
  for (TransformerBlock& b : blocks_)
    if (RouterBias* bias = b.mlp().router_bias()) biases.push_back(bias);
  return biases;
}

std::vector<const RouterBias*> LlamaModel::router_biases() const {
  std::vector<const RouterBias*> biases;
  for (const TransformerBlock& b : blocks_)
    if (const RouterBias* bias = b.mlp().router_bias()) biases.push_back(bias);
  return biases;
}

void LlamaModel::reset_moe_loads() {
  for (MoeLoad& load : moe_loads_) load = MoeLoad{load.layer, std::vector<std::int64_t>(load.tokens.size(), 0)};
}

double LlamaModel::flops_per_token(std::int64_t S, bool full_window) const {
  const double attention = (full_window ? 12.0 : 6.0) * static_cast<double>(geo_.n_layers) *
                           static_cast<double>(geo_.d_model) * static_cast<double>(S);
  return 6.0 * static_cast<double>(matmul_params()) + attention;
}

}  // namespace ustrain
