#include "core/model/model_chunk.h"

#include <string>

namespace ustrain {

ModelChunk::ModelChunk(const ModelSection& cfg, const ModelGeometry& geometry, const ChunkSpan& span,
                       std::vector<const TransformerBlock*> blocks, ChunkParams params, const ParamSet& param_set,
                       TensorParallel& tp, Recompute policy, DType compute, ParamUseHooks* const& hooks)
    : cfg_(cfg),
      geo_(geometry),
      span_(span),
      blocks_(std::move(blocks)),
      p_(params),
      params_(param_set),
      tp_(tp),
      policy_(policy),
      compute_(compute),
      hooks_(hooks) {}

void ModelChunk::plan(MemoryPlan& plan, std::int64_t max_batch, int slots, int receive_buffers,
                      bool split_backward) {
  USTRAIN_ASSERT(slots >= 1 && receive_buffers >= 0, "a chunk needs at least one slot");
  USTRAIN_ASSERT(!split_backward || policy_ == Recompute::none, "a split backward needs every activation kept");
  split_ = split_backward;
  // Sizes on this rank: n token rows, r of them in the residual stream (n / tp under sp).
  const std::int64_t n = geo_.tokens(max_batch), r = geo_.rows(n), d = geo_.d_model;
  const std::int64_t h = geo_.heads, dh = geo_.head_dim, f = geo_.ffn_local, w = geo_.qkv_width();
  const auto act = MemCategory::activations;
  const DType c = compute_;  // activations; statistics (rstd, lse, losses) stay fp32
  const std::string chunk = geo_.chunks.size() > 1 ? "chunk" + std::to_string(span_.stage) + "." : "";
  const auto name = [&](int slot, const std::string& what) {
    return chunk + (slots > 1 ? "slot" + std::to_string(slot) + "." : "") + what;
  };

  // Activations a policy does not keep live in one shared scratch set, reused by every layer
  // and slot of the chunk.
  const bool keep_all = policy_ == Recompute::none;
  const bool keep_most = policy_ != Recompute::full;
  LayerHandles shared{};
  slots_.assign(static_cast<std::size_t>(slots), Slot{});
  for (int k = 0; k < slots; ++k) {
    Slot& s = slots_[static_cast<std::size_t>(k)];
    const auto pick = [&](bool keep, int l, int LayerHandles::*field, const char* what, Shape shape, DType dtype) {
      if (keep) return plan.add(name(k, "layers." + std::to_string(l) + "." + what), act, shape, dtype);
      if (shared.*field == 0) shared.*field = plan.add(chunk + "scratch." + what, act, shape, dtype) + 1;
      return shared.*field - 1;  // stored +1 so 0 means "not yet planned"
    };
    for (int l = span_.first_layer; l <= span_.end_layer; ++l)
      s.resid.push_back(plan.add(name(k, "residual." + std::to_string(l)), act, Shape{r, d}, c));
    for (int l = span_.first_layer; l < span_.end_layer; ++l) {
      LayerHandles a{};
      using H = LayerHandles;
      a.ln1_rstd = pick(keep_most, l, &H::ln1_rstd, "ln1_rstd", Shape{r}, DType::f32);
      a.ln1_out = pick(keep_all, l, &H::ln1_out, "ln1_out", Shape{r, d}, c);
      a.qkv = pick(keep_most, l, &H::qkv, "qkv", Shape{n, w}, c);
      a.att = pick(keep_most, l, &H::att, "attention_out", Shape{n, h * dh}, c);
      a.lse = pick(keep_most, l, &H::lse, "attention_lse", Shape{n * h}, DType::f32);
      a.x_mid = pick(keep_most, l, &H::x_mid, "x_mid", Shape{r, d}, c);
      a.ln2_rstd = pick(keep_most, l, &H::ln2_rstd, "ln2_rstd", Shape{r}, DType::f32);
      a.ln2_out = pick(keep_all, l, &H::ln2_out, "ln2_out", Shape{r, d}, c);
      a.gate_up = pick(keep_most, l, &H::gate_up, "gate_up", Shape{n, 2 * f}, c);
      a.act = pick(keep_all, l, &H::act, "swiglu_out", Shape{n, f}, c);
      s.layers.push_back(a);
      if (split_) {
        const std::string layer = "layers." + std::to_string(l) + ".";
        s.deferred.push_back({plan.add(name(k, layer + "grad.down_out"), act, Shape{n, d}, c),
                              plan.add(name(k, layer + "grad.gate_up"), act, Shape{n, 2 * f}, c),
                              plan.add(name(k, layer + "grad.o_out"), act, Shape{n, d}, c),
                              plan.add(name(k, layer + "grad.qkv"), act, Shape{n, w}, c)});
      }
    }
    if (span_.embedding) s.ids = plan.add(name(k, "input_ids"), act, Shape{n}, DType::i32);
    else s.input_grad = plan.add(name(k, "input_grad"), act, Shape{r, d}, c);
    if (span_.head) {
      s.targets = plan.add(name(k, "target_ids"), act, Shape{n}, DType::i32);
      s.final_rstd = plan.add(name(k, "final_norm.rstd"), act, Shape{r});
      s.final_out = plan.add(name(k, "final_norm.out"), act, Shape{n, d}, c);  // every row: the head needs all
      s.ce_lse = plan.add(name(k, "cross_entropy.lse"), act, Shape{n});
      s.losses = plan.add(name(k, "losses"), act, Shape{n});
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
  if (handle < 0) return Tensor();
  const Tensor t = mem_->tensor(handle);
  if (t.shape.rank() == 1) return Tensor(t.data, Shape{n}, t.dtype, t.device);
  return Tensor(t.data, Shape{n, t.shape.last()}, t.dtype, t.device);
}

static Tensor first_rows(const Tensor& t, std::int64_t n) {
  if (t.empty()) return t;
  return Tensor(t.data, Shape{n, t.shape.last()}, t.dtype, t.device);
}

BlockActivations ModelChunk::layer_views(const Slot& s, int layer) const {
  const LayerHandles& h = s.layers[static_cast<std::size_t>(layer - span_.first_layer)];
  const std::int64_t B = s.batch, S = s.seq, n = B * S, r = geo_.rows(n);
  BlockActivations a;
  a.ln1_rstd = rows(h.ln1_rstd, r);
  a.ln1_out = rows(h.ln1_out, r);
  const Tensor qkv = rows(h.qkv, n);
  a.qkv = qkv.view(Shape{B, S, qkv.shape.last()});  // (B, S, W)
  const Tensor att = rows(h.att, n);
  a.att = att.view(Shape{B, S, att.shape.last()});  // (B, S, H Dh)
  a.lse = rows(h.lse, n * geo_.heads).view(Shape{B, geo_.heads, S});
  a.x_mid = rows(h.x_mid, r);
  a.ln2_rstd = rows(h.ln2_rstd, r);
  a.ln2_out = rows(h.ln2_out, r);
  a.gate_up = rows(h.gate_up, n);
  a.act = rows(h.act, n);
  return a;
}

BlockGradients ModelChunk::grad_views(std::int64_t B, std::int64_t S) const {
  const std::int64_t n = B * S, r = geo_.rows(n);
  BlockGradients g;
  g.d_resid = first_rows(scratch_.d_resid, r);
  g.d_branch = first_rows(scratch_.d_branch, r);
  g.d_norm = first_rows(scratch_.d_norm, r);
  const Tensor att = first_rows(scratch_.d_att, n);
  g.d_att = att.view(Shape{B, S, att.shape.last()});
  const Tensor qkv = first_rows(scratch_.d_qkv, n);
  g.d_qkv = qkv.view(Shape{B, S, qkv.shape.last()});
  g.d_gate_up = first_rows(scratch_.d_gate_up, n);
  g.d_act = first_rows(scratch_.d_act, n);
  g.gathered = first_rows(scratch_.gathered, n);
  g.d_full = first_rows(scratch_.d_full, n);
  return g;
}

DeferredGrads ModelChunk::deferred_views(const Slot& s, int layer) const {
  const DeferredHandles& h = s.deferred[static_cast<std::size_t>(layer - span_.first_layer)];
  const std::int64_t n = s.batch * s.seq;
  const Tensor qkv = rows(h.d_qkv, n);
  return {rows(h.d_down, n), rows(h.d_gate_up, n), rows(h.d_o, n), qkv.view(Shape{s.batch, s.seq, qkv.shape.last()})};
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

double ModelChunk::forward(Backend& be, int slot, std::int64_t B, std::int64_t S, const std::int32_t* ids,
                           const std::int32_t* targets, Tensor input) {
  USTRAIN_ASSERT(mem_ != nullptr, "chunk used before bind()");
  Slot& s = slots_.at(static_cast<std::size_t>(slot));
  s.batch = B;
  s.seq = S;
  const std::int64_t n = B * S, r = geo_.rows(n);
  USTRAIN_ASSERT(!geo_.sequence_parallel() || n % geo_.tp == 0, "sequence parallelism needs B * S divisible by tp");
  const BlockGradients scratch = grad_views(B, S);  // the forward uses only its sp scratch
  const Tensor branch = first_rows(scratch_.branch, n);
  if (span_.embedding) {
    const Tensor ids_t = rows(s.ids, n);
    be.copy(ids_t, Tensor(const_cast<std::int32_t*>(ids), Shape{n}, DType::i32));
    acquire(0, false);
    tp_.embed(be, rows(s.resid[0], r), ids_t, params_[p_.embed].value, branch);  // (R, D)
    release(0);
  } else {
    be.copy(rows(s.resid[0], r), input);
  }
  for (std::size_t l = 0; l < blocks_.size(); ++l) {
    acquire(blocks_[l]->unit(), false);
    blocks_[l]->forward(be, tp_, rows(s.resid[l], r), rows(s.resid[l + 1], r),
                        layer_views(s, span_.first_layer + static_cast<int>(l)), scratch, branch, rope_);
    release(blocks_[l]->unit());
  }
  if (!span_.head) return 0;

  const int head_param_unit = params_.specs()[static_cast<std::size_t>(p_.head)].unit;
  const bool head_elsewhere = head_param_unit != head_unit();  // the embedding (tied), in its own unit
  const Tensor targets_t = rows(s.targets, n);
  be.copy(targets_t, Tensor(const_cast<std::int32_t*>(targets), Shape{n}, DType::i32));
  acquire(head_unit(), false);
  if (head_elsewhere) acquire(head_param_unit, false);
  const Tensor final_full = rows(s.final_out, n);  // (N, D)
  be.rmsnorm_forward(tp_.own_rows(final_full), rows(s.final_rstd, r), rows(s.resid.back(), r),
                     params_[p_.final_norm].value, static_cast<float>(cfg_.norm_eps));
  tp_.gather(tp_.own_rows(final_full), final_full);  // in place under sp
  logits_of_ = rows(logits_, n);  // (N, Vs)
  be.linear_forward(logits_of_, final_full, params_[p_.head].value);
  logits_slot_ = slot;
  const Tensor losses = rows(s.losses, n);
  tp_.loss(be, losses, rows(s.ce_lse, n), logits_of_, targets_t, ce_parts_ >= 0 ? mem_->tensor(ce_parts_) : Tensor());
  if (head_elsewhere) release(head_param_unit);
  release(head_unit());

  std::vector<float> host(static_cast<std::size_t>(n));
  be.copy(Tensor(host.data(), Shape{n}), losses);
  double sum = 0;
  for (float x : host) sum += x;
  return sum;
}

// The head: the cross-entropy gradient overwrites the logits in place (fused, no extra
// buffer); logits another slot's forward overwrote since are computed again first.
void ModelChunk::head_backward(Backend& be, int slot, float dloss, const BlockGradients& g) {
  const Slot& s = slots_[static_cast<std::size_t>(slot)];
  const std::int64_t n = s.batch * s.seq, r = geo_.rows(n);
  const int head_param_unit = params_.specs()[static_cast<std::size_t>(p_.head)].unit;
  const bool head_elsewhere = head_param_unit != head_unit();
  acquire(head_unit(), true);
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
    if (head_param_unit != 0) grads_done(head_param_unit);  // the last stage's copy of the embedding
  }
  release(head_unit());
  grads_done(head_unit());
}

void ModelChunk::backward(Backend& be, int slot, Tensor grad, float dloss, bool weights) {
  USTRAIN_ASSERT(weights || split_, "a chunk planned without a split backward computes weight gradients at once");
  Slot& s = slots_.at(static_cast<std::size_t>(slot));
  USTRAIN_ASSERT(s.batch > 0, "backward of a slot without a forward");
  const std::int64_t n = s.batch * s.seq, r = geo_.rows(n);
  const BlockGradients g = grad_views(s.batch, s.seq);
  if (span_.head) head_backward(be, slot, dloss, g);
  else be.copy(g.d_resid, grad);

  const Tensor branch = first_rows(scratch_.branch, n);
  for (std::size_t l = blocks_.size(); l-- > 0;) {
    const int layer = span_.first_layer + static_cast<int>(l);
    const DeferredGrads deferred = weights ? DeferredGrads{} : deferred_views(s, layer);
    acquire(blocks_[l]->unit(), true);
    blocks_[l]->backward(be, tp_, rows(s.resid[l], r), layer_views(s, layer), g, branch, rope_, policy_,
                         weights ? nullptr : &deferred);
    release(blocks_[l]->unit());
    if (weights) grads_done(blocks_[l]->unit());
  }

  if (span_.embedding) {
    acquire(0, true);
    tp_.embed_backward(be, params_[p_.embed].grad, rows(s.ids, n), g.d_resid, g.d_full);
    release(0);
    grads_done(0);
  } else {
    be.copy(input_grad(slot), g.d_resid);
  }
}

void ModelChunk::backward_weight(Backend& be, int slot) {
  USTRAIN_ASSERT(split_, "backward_weight needs a chunk planned with a split backward");
  const Slot& s = slots_.at(static_cast<std::size_t>(slot));
  const BlockGradients g = grad_views(s.batch, s.seq);
  for (std::size_t l = blocks_.size(); l-- > 0;) {
    const int layer = span_.first_layer + static_cast<int>(l);
    blocks_[l]->backward_weight(be, tp_, layer_views(s, layer), g, deferred_views(s, layer));
    grads_done(blocks_[l]->unit());
  }
}

}  // namespace ustrain
