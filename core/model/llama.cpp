#include "core/model/llama.h"

#include <cmath>

#include "core/model/rope_frequencies.h"

namespace ustrain {

LlamaModel::LlamaModel(const ModelSection& cfg, std::int64_t max_batch, std::int64_t max_seq, Recompute policy,
                       DType compute, const ModelGeometry* geometry, TensorParallel* tp)
    : cfg_(cfg),
      geo_(geometry ? *geometry : ModelGeometry::of(cfg)),
      tp_(tp ? tp : &no_tp_),
      max_batch_(max_batch),
      max_seq_(max_seq),
      policy_(policy),
      compute_(compute) {
  // A model planned for a tensor-parallel rank but given no group can be planned (--dry-run),
  // not run: forward checks.
  USTRAIN_ASSERT(tp == nullptr || (tp_->size() == geo_.tp && tp_->rank() == geo_.tp_rank &&
                                   tp_->sequence_parallel() == geo_.sequence_parallel()),
                 "the tensor-parallel group does not match the model's geometry");
  const std::int64_t v = geo_.vocab, d = geo_.d_model;
  const int last_unit = static_cast<int>(geo_.n_layers) + 1;
  embed_ = params_.declare({"model.embed_tokens.weight", Shape{v, d}, true, false, cfg.init_std, 0});
  blocks_.reserve(static_cast<std::size_t>(geo_.n_layers));
  for (int l = 0; l < geo_.n_layers; ++l) blocks_.emplace_back(l, l + 1, cfg, geo_, params_);
  final_norm_ = params_.declare({"model.norm.weight", Shape{d}, false, false, 0.0, last_unit});
  head_ = cfg.tied_embeddings
              ? embed_
              : params_.declare({"lm_head.weight", Shape{v, d}, true, false, cfg.init_std, last_unit});
}

void LlamaModel::plan(MemoryPlan& plan, ParamSharding sharding) {
  params_.plan(plan, sharding, compute_);
  // Sizes on this rank: n token rows, r of them in the residual stream (n / tp under sp).
  const std::int64_t n = max_batch_ * max_seq_, r = geo_.rows(n), d = geo_.d_model;
  const std::int64_t h = geo_.heads, dh = geo_.head_dim, f = geo_.ffn_local, w = geo_.qkv_width();
  const auto act = MemCategory::activations;
  const auto work = MemCategory::workspace;
  const DType c = compute_;  // activations; statistics (rstd, lse, losses) stay fp32

  ids_ = plan.add("input_ids", act, Shape{n}, DType::i32);
  targets_ = plan.add("target_ids", act, Shape{n}, DType::i32);
  rope_cos_ = plan.add("rope.cos", act, Shape{max_seq_, dh / 2});
  rope_sin_ = plan.add("rope.sin", act, Shape{max_seq_, dh / 2});
  resid_.clear();
  for (int l = 0; l <= geo_.n_layers; ++l)
    resid_.push_back(plan.add("residual." + std::to_string(l), act, Shape{r, d}, c));

  // Activations a policy does not keep live in one shared scratch set, reused by every layer.
  const bool keep_all = policy_ == Recompute::none;
  const bool keep_most = policy_ != Recompute::full;
  LayerActivationHandles shared{};
  const auto pick = [&](bool keep, int l, int LayerActivationHandles::*field, const char* name, Shape shape,
                        DType dtype) {
    if (keep) return plan.add("layers." + std::to_string(l) + "." + name, act, shape, dtype);
    if (shared.*field == 0) shared.*field = plan.add(std::string("scratch.") + name, act, shape, dtype) + 1;
    return shared.*field - 1;  // stored +1 so 0 means "not yet planned"
  };
  layer_acts_.clear();
  for (int l = 0; l < geo_.n_layers; ++l) {
    LayerActivationHandles a{};
    using H = LayerActivationHandles;
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
    layer_acts_.push_back(a);
  }
  final_rstd_ = plan.add("final_norm.rstd", act, Shape{r});
  final_out_ = plan.add("final_norm.out", act, Shape{n, d}, c);  // every row: the head multiplies them all
  logits_ = plan.add("logits", act, Shape{n, geo_.vocab_local}, c);
  losses_ = plan.add("losses", act, Shape{n});
  ce_lse_ = plan.add("cross_entropy.lse", act, Shape{n});
  ce_parts_ = geo_.tp > 1 ? plan.add("cross_entropy.shard_stats", act, Shape{geo_.tp, 2, n}) : -1;
  branch_ = plan.add("branch_out", work, Shape{n, d}, c);

  d_resid_ = plan.add("grad.residual", work, Shape{r, d}, c);
  d_branch_ = plan.add("grad.branch", work, Shape{r, d}, c);
  d_norm_ = plan.add("grad.norm_out", work, Shape{r, d}, c);
  d_att_ = plan.add("grad.attention_out", work, Shape{n, h * dh}, c);
  d_qkv_ = plan.add("grad.qkv", work, Shape{n, w}, c);
  d_gate_up_ = plan.add("grad.gate_up", work, Shape{n, 2 * f}, c);
  d_act_ = plan.add("grad.swiglu_out", work, Shape{n, f}, c);
  sp_gathered_ = sp_d_full_ = -1;
  if (geo_.sequence_parallel()) {
    sp_gathered_ = plan.add("sequence_parallel.gathered", work, Shape{n, d}, c);
    sp_d_full_ = plan.add("sequence_parallel.grad_full", work, Shape{n, d}, c);
  }
}

void LlamaModel::bind(const PlannedMemory& mem, Backend& backend) {
  mem_ = &mem;
  params_.bind(mem);
  rope_ = {mem.tensor(rope_cos_), mem.tensor(rope_sin_)};
  backend.rope_tables(rope_.cos, rope_.sin, rope_inverse_frequencies(cfg_, geo_.head_dim));
}

Tensor LlamaModel::rows(int handle, std::int64_t n) const {
  if (handle < 0) return Tensor();
  const Tensor t = mem_->tensor(handle);
  if (t.shape.rank() == 1) return Tensor(t.data, Shape{n}, t.dtype, t.device);
  return Tensor(t.data, Shape{n, t.shape.last()}, t.dtype, t.device);
}

BlockActivations LlamaModel::block_views(int layer, std::int64_t B, std::int64_t S) const {
  const auto& h = layer_acts_[static_cast<std::size_t>(layer)];
  const std::int64_t n = B * S, r = geo_.rows(n);
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

BlockGradients LlamaModel::grad_views(std::int64_t B, std::int64_t S) const {
  const std::int64_t n = B * S, r = geo_.rows(n);
  BlockGradients g;
  g.d_resid = rows(d_resid_, r);
  g.d_branch = rows(d_branch_, r);
  g.d_norm = rows(d_norm_, r);
  const Tensor att = rows(d_att_, n);
  g.d_att = att.view(Shape{B, S, att.shape.last()});
  const Tensor qkv = rows(d_qkv_, n);
  g.d_qkv = qkv.view(Shape{B, S, qkv.shape.last()});
  g.d_gate_up = rows(d_gate_up_, n);
  g.d_act = rows(d_act_, n);
  g.gathered = rows(sp_gathered_, n);
  g.d_full = rows(sp_d_full_, n);
  return g;
}

double LlamaModel::forward(Backend& be, const std::int32_t* ids, const std::int32_t* targets, std::int64_t B,
                           std::int64_t S) {
  USTRAIN_ASSERT(mem_ != nullptr, "model used before bind()");
  USTRAIN_ASSERT(B >= 1 && S >= 1 && B <= max_batch_ && S <= max_seq_, "batch larger than planned");
  const std::int64_t n = B * S, r = geo_.rows(n);
  USTRAIN_ASSERT(tp_->size() == geo_.tp, "a tensor-parallel model runs only with its tensor-parallel group");
  USTRAIN_ASSERT(!geo_.sequence_parallel() || n % geo_.tp == 0, "sequence parallelism needs B * S divisible by tp");
  TensorParallel& tp = *tp_;
  const Tensor ids_t = rows(ids_, n), targets_t = rows(targets_, n);
  be.copy(ids_t, Tensor(const_cast<std::int32_t*>(ids), Shape{n}, DType::i32));
  be.copy(targets_t, Tensor(const_cast<std::int32_t*>(targets), Shape{n}, DType::i32));
  const BlockGradients scratch = grad_views(B, S);  // the forward uses only its sp scratch
  const Tensor branch = rows(branch_, n);

  acquire(0, false);
  tp.embed(be, rows(resid_[0], r), ids_t, params_[embed_].value, branch);  // (R, D)
  release(0);
  for (std::size_t l = 0; l < blocks_.size(); ++l) {
    acquire(blocks_[l].unit(), false);
    blocks_[l].forward(be, tp, rows(resid_[l], r), rows(resid_[l + 1], r), block_views(static_cast<int>(l), B, S),
                       scratch, branch, rope_);
    release(blocks_[l].unit());
  }

  const int last_unit = static_cast<int>(blocks_.size()) + 1;
  const bool tied = head_ == embed_;
  acquire(last_unit, false);
  if (tied) acquire(0, false);
  const Tensor final_full = rows(final_out_, n);  // (N, D)
  be.rmsnorm_forward(tp.own_rows(final_full), rows(final_rstd_, r), rows(resid_.back(), r),
                     params_[final_norm_].value, static_cast<float>(cfg_.norm_eps));
  tp.gather(tp.own_rows(final_full), final_full);  // in place under sp
  last_logits_ = rows(logits_, n);  // (N, Vs)
  be.linear_forward(last_logits_, final_full, params_[head_].value);
  const Tensor losses = rows(losses_, n);
  tp.loss(be, losses, rows(ce_lse_, n), last_logits_, targets_t, ce_parts_ >= 0 ? mem_->tensor(ce_parts_) : Tensor());
  if (tied) release(0);
  release(last_unit);

  host_losses_.resize(static_cast<std::size_t>(n));
  be.copy(Tensor(host_losses_.data(), Shape{n}), losses);
  double sum = 0;
  for (float x : host_losses_) sum += x;
  last_b_ = B;
  last_s_ = S;
  return sum;
}

void LlamaModel::backward(Backend& be, float dloss) {
  USTRAIN_ASSERT(last_b_ > 0, "backward without forward");
  const std::int64_t B = last_b_, S = last_s_, n = B * S, r = geo_.rows(n);
  TensorParallel& tp = *tp_;
  const BlockGradients g = grad_views(B, S);

  // Head: the cross-entropy gradient overwrites the logits in place (fused, no extra buffer).
  const int last_unit = static_cast<int>(blocks_.size()) + 1;
  const bool tied = head_ == embed_;
  acquire(last_unit, true);
  if (tied) acquire(0, true);
  tp.loss_backward(be, last_logits_, last_logits_, rows(ce_lse_, n), rows(targets_, n), dloss);
  const Tensor d_part = tp.partial_buffer(g.d_norm, g.d_full);  // (N, D)
  be.linear_backward(d_part, params_[head_].grad, last_logits_, rows(final_out_, n), params_[head_].value);
  be.rmsnorm_backward(g.d_resid, params_[final_norm_].grad, tp.reduce(d_part, g.d_norm), rows(resid_.back(), r),
                      params_[final_norm_].value, rows(final_rstd_, r));
  if (tied) release(0);  // a tied head's gradient completes with the embedding's
  release(last_unit);
  grads_done(last_unit);

  const Tensor branch = rows(branch_, n);
  for (std::size_t l = blocks_.size(); l-- > 0;) {
    acquire(blocks_[l].unit(), true);
    blocks_[l].backward(be, tp, rows(resid_[l], r), block_views(static_cast<int>(l), B, S), g, branch, rope_,
                        policy_);
    release(blocks_[l].unit());
    grads_done(blocks_[l].unit());
  }

  acquire(0, true);
  tp.embed_backward(be, params_[embed_].grad, rows(ids_, n), g.d_resid, g.d_full);
  release(0);
  grads_done(0);
  last_b_ = 0;  // the logits now hold gradients
  last_logits_ = Tensor();
}

std::int64_t LlamaModel::matmul_params() const {
  std::int64_t total = 0;
  for (const ParamSpec& s : params_.specs())
    if (s.shape.rank() == 2 && s.name != "model.embed_tokens.weight") total += s.shape.numel();
  if (cfg_.tied_embeddings) total += geo_.vocab * geo_.d_model;  // the head still multiplies
  return total;
}

double LlamaModel::flops_per_token(std::int64_t S) const {
  return 6.0 * static_cast<double>(matmul_params()) +
         6.0 * static_cast<double>(geo_.n_layers) * static_cast<double>(geo_.d_model) * static_cast<double>(S);
}

}  // namespace ustrain
