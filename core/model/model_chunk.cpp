#include "core/model/model_chunk.h"

#include <map>
#include <string>

namespace ustrain {

ModelChunk::ModelChunk(const ModelSection& cfg, const ModelGeometry& geometry, const ChunkSpan& span,
                       std::vector<const TransformerBlock*> blocks, std::vector<MoeLoad*> loads, ChunkParams params,
                       const ParamRegistry& param_set, LayerParallel par, Recompute policy, DType compute,
                       ParamUseHooks* const& hooks)
    : cfg_(cfg),
      geo_(geometry),
      span_(span),
      blocks_(std::move(blocks)),
      loads_(std::move(loads)),
      p_(params),
      params_(param_set),
      par_(par),
      tp_(par.tp),
      policy_(policy),
      compute_(compute),
      hooks_(hooks) {
  USTRAIN_ASSERT(loads_.size() == blocks_.size(), "a chunk needs one load entry per block");
}

void ModelChunk::plan(MemoryPlan& plan, std::int64_t max_batch, int slots, int receive_buffers,
                      bool split_backward) {
  USTRAIN_ASSERT(slots >= 1 && receive_buffers >= 0, "a chunk needs at least one slot");
  USTRAIN_ASSERT(!split_backward || policy_ == Recompute::none, "a split backward needs every activation kept");
  split_ = split_backward;
  // Sizes on this rank: n token rows, r of them in the residual stream (n / tp under sp).
  const std::int64_t n = geo_.tokens(max_batch), r = geo_.rows(n), d = geo_.d_model;
  const auto act = MemCategory::activations;
  const DType c = compute_;  // activations; statistics (rstd, lse, losses) stay fp32
  const std::string chunk = geo_.chunks.size() > 1 ? "chunk" + std::to_string(span_.stage) + "." : "";
  const auto name = [&](int slot, const std::string& what) {
    return chunk + (slots > 1 ? "slot" + std::to_string(slot) + "." : "") + what;
  };

  // Activations a policy does not keep live in one shared scratch set, reused by every layer
  // and slot of the chunk.
  std::map<std::string, int> shared;
  slots_.assign(static_cast<std::size_t>(slots), Slot{});
  for (int k = 0; k < slots; ++k) {
    Slot& s = slots_[static_cast<std::size_t>(k)];
    const auto per_layer = [&](int l, const ActivationSpec& a) {
      return plan.add(name(k, "layers." + std::to_string(l) + "." + a.name), act, a.shape, a.dtype);
    };
    const auto pick = [&](int l, const ActivationSpec& a) {
      if (a.kept(policy_)) return per_layer(l, a);
      const auto [at, first] = shared.try_emplace(a.name, -1);
      if (first) at->second = plan.add(chunk + "scratch." + a.name, act, a.shape, a.dtype);
      return at->second;
    };
    for (MoeLoad* load : loads_) s.routed.push_back(RoutedTokens{{}, {}, load});
    for (int l = span_.first_layer; l <= span_.end_layer; ++l)
      s.resid.push_back(plan.add(name(k, "residual." + std::to_string(l)), act, Shape{r, d}, c));
    for (int l = span_.first_layer; l < span_.end_layer; ++l) {
      const TransformerBlock& block = *blocks_[static_cast<std::size_t>(l - span_.first_layer)];
      LayerHandles h;
      for (const ActivationSpec& a : block.attention().activations(max_batch, c)) h.attention.push_back(pick(l, a));
      h.x_mid = pick(l, block.x_mid(max_batch, c));
      for (const ActivationSpec& a : block.mlp().activations(max_batch, c)) h.mlp.push_back(pick(l, a));
      if (split_) {
        for (const ActivationSpec& a : block.mlp().deferred(max_batch, c)) h.mlp_deferred.push_back(per_layer(l, a));
        for (const ActivationSpec& a : block.attention().deferred(max_batch, c))
          h.attention_deferred.push_back(per_layer(l, a));
      }
      s.layers.push_back(std::move(h));
    }
    if (geo_.documents)  // of whole windows: the ring meets every part's keys (kernels/token_batch.h)
      s.documents = plan.add(name(k, "document_ids"), act, Shape{n * geo_.context.size}, DType::i32);
    if (span_.embedding) s.ids = plan.add(name(k, "input_ids"), act, Shape{n}, DType::i32);
    else s.input_grad = plan.add(name(k, "input_grad"), act, Shape{r, d}, c);
    if (span_.head) {
      s.targets = plan.add(name(k, "target_ids"), act, Shape{n}, DType::i32);
      s.final_rstd = plan.add(name(k, "final_norm.rstd"), act, Shape{r});
      s.final_out = plan.add(name(k, "final_norm.out"), act, Shape{n, d}, c);  // every row: the head needs all
      s.ce_lse = plan.add(name(k, "cross_entropy.lse"), act, Shape{n});
    }
  }
  receive_.clear();
  for (int i = 0; i < receive_buffers; ++i)
    receive_.push_back(plan.add(chunk + "receive." + std::to_string(i), act, Shape{r, d}, c));
  logits_ = ce_parts_ = -1;
  if (span_.head) {
    logits_ = plan.add(chunk + "logits", act, Shape{n, geo_.vocab_local}, c);
    if (geo_.tp > 1) ce_parts_ = plan.add(chunk + "cross_entropy.shard_stats", act, Shape{geo_.tp, 2, n});
  }
}

void ModelChunk::bind(const PlannedMemory& mem, const SharedScratch& scratch, const RopeTables& rope) {
  mem_ = &mem;
  scratch_ = scratch;
  rope_ = rope;
  logits_slot_ = -1;
}

Tensor ModelChunk::rows(int handle, std::int64_t n) const {
  return handle < 0 ? Tensor() : first_rows(mem_->tensor(handle), n);
}

std::vector<Tensor> ModelChunk::tensors(const std::vector<int>& handles) const {
  std::vector<Tensor> t;
  t.reserve(handles.size());
  for (int h : handles) t.push_back(mem_->tensor(h));
  return t;
}

BlockMemory ModelChunk::layer_memory(Slot& s, int layer, bool deferred) const {
  const auto index = static_cast<std::size_t>(layer - span_.first_layer);
  const LayerHandles& h = s.layers[index];
  BlockMemory m;
  m.attention = {s.batch, s.seq, tensors(h.attention), deferred ? tensors(h.attention_deferred) : std::vector<Tensor>{},
                 scratch_.attention};
  m.mlp = {s.batch, s.seq, tensors(h.mlp), deferred ? tensors(h.mlp_deferred) : std::vector<Tensor>{},
           scratch_.mlp.at(blocks_[index]->mlp().kind()), &s.routed[index]};
  m.x_mid = rows(h.x_mid, geo_.rows(s.batch * s.seq));
  const std::int64_t window = s.seq * geo_.context.size;
  if (s.has_documents) m.attention.documents = rows(s.documents, s.batch * window).view(Shape{s.batch, window});
  return m;
}

void ModelChunk::acquire_block(std::size_t l, bool backward) const {
  for (UnitId unit : blocks_[l]->units()) acquire(unit, backward);
}

void ModelChunk::release_block(std::size_t l) const {
  const std::vector<UnitId> units = blocks_[l]->units();
  for (auto u = units.rbegin(); u != units.rend(); ++u) release(*u);
}

BlockScratch ModelChunk::scratch_rows(std::int64_t B, std::int64_t S) const {
  const std::int64_t n = B * S, r = geo_.rows(n);
  const BlockScratch& full = scratch_.block;
  return {first_rows(full.d_resid, r), first_rows(full.d_branch, r), first_rows(full.d_norm, r),
          first_rows(full.branch, n),  first_rows(full.gathered, n), first_rows(full.d_full, n)};
}

Tensor ModelChunk::output(int slot) const {
  const Slot& s = slots_.at(static_cast<std::size_t>(slot));
  return rows(s.resid.back(), geo_.rows(s.batch * s.seq));
}

Tensor ModelChunk::input_grad(int slot) const {
  const Slot& s = slots_.at(static_cast<std::size_t>(slot));
  return rows(s.input_grad, geo_.rows(s.batch * s.seq));
}

Tensor ModelChunk::receive_buffer(int i, std::int64_t batch, std::int64_t seq) const {
  return rows(receive_.at(static_cast<std::size_t>(i)), geo_.rows(batch * seq));
}

void ModelChunk::forward(Backend& be, int slot, std::int64_t B, std::int64_t S, const TokenBatch& tokens,
                         Tensor input, Tensor losses) {
  USTRAIN_ASSERT(mem_ != nullptr, "chunk used before bind()");
  Slot& s = slots_.at(static_cast<std::size_t>(slot));
  s.batch = B;
  s.seq = S;
  const std::int64_t n = B * S, r = geo_.rows(n);
  USTRAIN_ASSERT(!geo_.sequence_parallel() || n % geo_.tp == 0, "sequence parallelism needs B * S divisible by tp");
  const BlockScratch g = scratch_rows(B, S);  // the forward uses its branch and sp scratch
  s.has_documents = !tokens.documents.empty();
  if (s.has_documents) {  // once per micro-batch, for every layer
    const std::int64_t windows = n * geo_.context.size;
    USTRAIN_ASSERT(s.documents >= 0, "document ids for a model planned without them");
    USTRAIN_ASSERT(tokens.documents.size() == static_cast<std::size_t>(windows),
                   "a token batch whose document ids are not those of its B whole windows");
    be.copy(rows(s.documents, windows),
            Tensor(const_cast<std::int32_t*>(tokens.documents.data()), Shape{windows}, DType::i32));
  }
  if (span_.embedding) {
    const Tensor ids_t = rows(s.ids, n);
    USTRAIN_ASSERT(tokens.ids.size() >= static_cast<std::size_t>(n), "a token batch with fewer ids than B * S");
    be.copy(ids_t, Tensor(const_cast<std::int32_t*>(tokens.ids.data()), Shape{n}, DType::i32));
    acquire(UnitId::embedding(), false);
    tp_.embed(be, rows(s.resid[0], r), ids_t, params_[p_.embed].value, g.branch);  // (R, D)
    release(UnitId::embedding());
  } else {
    be.copy(rows(s.resid[0], r), input);
  }
  for (std::size_t l = 0; l < blocks_.size(); ++l) {
    acquire_block(l, false);
    blocks_[l]->forward(be, par_, rows(s.resid[l], r), rows(s.resid[l + 1], r),
                        layer_memory(s, span_.first_layer + static_cast<int>(l), false), g, rope_);
    release_block(l);
  }
  if (!span_.head) return;

  const UnitId head_param_unit = params_.spec(p_.head).unit;
  const bool head_elsewhere = head_param_unit != UnitId::head();  // the embedding (tied), in its own unit
  const Tensor targets_t = rows(s.targets, n);
  USTRAIN_ASSERT(tokens.targets.size() >= static_cast<std::size_t>(n), "a token batch with fewer targets than B * S");
  be.copy(targets_t, Tensor(const_cast<std::int32_t*>(tokens.targets.data()), Shape{n}, DType::i32));
  acquire(UnitId::head(), false);
  if (head_elsewhere) acquire(head_param_unit, false);
  const Tensor final_full = rows(s.final_out, n);  // (N, D)
  be.rmsnorm_forward(tp_.own_rows(final_full), rows(s.final_rstd, r), rows(s.resid.back(), r),
                     params_[p_.final_norm].value, static_cast<float>(cfg_.norm_eps));
  tp_.gather(tp_.own_rows(final_full), final_full);  // in place under sp
  logits_of_ = rows(logits_, n);  // (N, Vs)
  be.linear_forward(logits_of_, final_full, params_[p_.head].value);
  logits_slot_ = slot;
  USTRAIN_ASSERT(losses.numel() == n && losses.dtype == DType::f32, "the losses of a micro-batch need (B * S) fp32");
  tp_.loss(be, losses, rows(s.ce_lse, n), logits_of_, targets_t, ce_parts_ >= 0 ? mem_->tensor(ce_parts_) : Tensor());
  if (head_elsewhere) release(head_param_unit);
  release(UnitId::head());
}

Tensor ModelChunk::decode(Backend& be, KvCache& cache, const std::int32_t* ids, std::int64_t n) const {
  cache.prepare(be, n);
  const Tensor ids_t = cache.ids(n);
  be.copy(ids_t, Tensor(const_cast<std::int32_t*>(ids), Shape{n}, DType::i32));
  be.embedding_forward(cache.residual(0, n), ids_t, params_[p_.embed].value);  // (n, D)
  const BlockScratch s = cache.scratch(n);
  for (std::size_t l = 0; l < blocks_.size(); ++l)
    blocks_[l]->decode(be, par_, cache.residual(static_cast<int>(l % 2), n), cache.residual(static_cast<int>((l + 1) % 2), n),
                       cache.layer(span_.first_layer + static_cast<int>(l), n), s);
  const Tensor last = cache.residual(static_cast<int>(blocks_.size() % 2), n).slice(n - 1, n);  // (1, D)
  be.rmsnorm_forward(cache.final_out(), cache.final_rstd(), last, params_[p_.final_norm].value,
                     static_cast<float>(cfg_.norm_eps));
  be.linear_forward(cache.logits(), cache.final_out(), params_[p_.head].value);  // (1, Vs)
  cache.advance(n);
  return cache.logits();
}

// The head: the cross-entropy gradient overwrites the logits in place (fused, no extra
// buffer); logits another slot's forward overwrote since are computed again first.
void ModelChunk::head_backward(Backend& be, int slot, float dloss, const BlockScratch& g) {
  const Slot& s = slots_[static_cast<std::size_t>(slot)];
  const std::int64_t n = s.batch * s.seq, r = geo_.rows(n);
  const UnitId head_param_unit = params_.spec(p_.head).unit;
  const bool head_elsewhere = head_param_unit != UnitId::head();
  acquire(UnitId::head(), true);
  if (head_elsewhere) acquire(head_param_unit, true);
  const Tensor final_full = rows(s.final_out, n);
  const Tensor logits = rows(logits_, n);
  if (logits_slot_ != slot) be.linear_forward(logits, final_full, params_[p_.head].value);
  logits_slot_ = -1;  // from here on the buffer holds gradients
  logits_of_ = Tensor();
  tp_.loss_backward(be, logits, logits, rows(s.ce_lse, n), rows(s.targets, n), dloss);
  const Tensor d_part = tp_.partial_buffer(g.d_norm, g.d_full);  // (N, D)
  be.linear_backward(d_part, params_[p_.head].grad, logits, final_full, params_[p_.head].value);
  be.rmsnorm_backward(g.d_resid, params_[p_.final_norm].grad, tp_.reduce(d_part, g.d_norm), rows(s.resid.back(), r),
                      params_[p_.final_norm].value, rows(s.final_rstd, r));
  if (head_elsewhere) {  // a tied head's gradient completes with the embedding's
    release(head_param_unit);
    if (head_param_unit != UnitId::embedding()) grads_done(head_param_unit);  // the last stage's copy
  }
  release(UnitId::head());
  grads_done(UnitId::head());
}

void ModelChunk::backward(Backend& be, int slot, Tensor grad, float dloss, bool weights) {
  USTRAIN_ASSERT(weights || split_, "a chunk planned without a split backward computes weight gradients at once");
  Slot& s = slots_.at(static_cast<std::size_t>(slot));
  USTRAIN_ASSERT(s.batch > 0, "backward of a slot without a forward");
  const std::int64_t n = s.batch * s.seq, r = geo_.rows(n);
  BlockScratch g = scratch_rows(s.batch, s.seq);
  g.loss_grad = dloss;
  if (span_.head) head_backward(be, slot, dloss, g);
  else be.copy(g.d_resid, grad);

  for (std::size_t l = blocks_.size(); l-- > 0;) {
    const int layer = span_.first_layer + static_cast<int>(l);
    acquire_block(l, true);
    blocks_[l]->backward(be, par_, rows(s.resid[l], r), layer_memory(s, layer, !weights), g, rope_, policy_);
    release_block(l);
    if (weights)
      for (UnitId unit : blocks_[l]->units()) grads_done(unit);
  }

  if (span_.embedding) {
    acquire(UnitId::embedding(), true);
    tp_.embed_backward(be, params_[p_.embed].grad, rows(s.ids, n), g.d_resid, g.d_full);
    release(UnitId::embedding());
    grads_done(UnitId::embedding());
  } else {
    be.copy(input_grad(slot), g.d_resid);
  }
}

void ModelChunk::backward_weight(Backend& be, int slot) {
  USTRAIN_ASSERT(split_, "backward_weight needs a chunk planned with a split backward");
  Slot& s = slots_.at(static_cast<std::size_t>(slot));
  const BlockScratch g = scratch_rows(s.batch, s.seq);
  for (std::size_t l = blocks_.size(); l-- > 0;) {
    const int layer = span_.first_layer + static_cast<int>(l);
    blocks_[l]->backward_weight(be, par_, layer_memory(s, layer, true), g);
    for (UnitId unit : blocks_[l]->units()) grads_done(unit);
  }
}

}  // namespace ustrain
