#include "core/model/grouped_query_attention.h"

namespace ustrain {

// The planned tensors of one micro-batch, by name (sizes in grouped_query_attention.h).
struct GroupedQueryAttention::Views {
  Tensor ln1_rstd;  // (R)
  Tensor ln1_out;   // (R, D)
  Tensor qkv;       // (B, S, W), q and k after RoPE
  Tensor att;       // (B, S, H Dh)
  Tensor lse;       // (B, H, S)
  Tensor d_att;     // (B, S, H Dh)
  Tensor d_qkv;     // (B, S, W): deferred (kept for the weight pass) or workspace
  Tensor d_o;       // (N, D) deferred only: the gradient of the o_proj output (every row)
  RingBuffers ring;  // context parallelism's (parallel/ring_attention.h); empty at cp = 1
  bool deferred = false;
};

GroupedQueryAttention::GroupedQueryAttention(int layer, UnitId unit, const ModelSection& cfg, const ModelGeometry& geo,
                                             ParamRegistry& params)
    : geo_(geo),
      layer_(layer),
      unit_(unit),
      n_heads_(static_cast<int>(geo.heads)),
      n_kv_heads_(static_cast<int>(geo.kv_heads)),
      head_dim_(static_cast<int>(geo.head_dim)),
      eps_(static_cast<float>(cfg.norm_eps)),
      params_(params) {
  const std::int64_t d = geo.d_model, dh = geo.head_dim, h = geo.n_heads, hkv = geo.n_kv_heads;
  const std::string p = layer_prefix(layer);
  const double std = cfg.init_std, out_std = residual_init_std(cfg);
  q_ = params.declare({p + "self_attn.q_proj.weight", Shape{h * dh, d}, true, false, std, unit});
  k_ = params.declare({p + "self_attn.k_proj.weight", Shape{hkv * dh, d}, true, true, std, unit});
  v_ = params.declare({p + "self_attn.v_proj.weight", Shape{hkv * dh, d}, true, true, std, unit});
  o_ = params.declare({p + "self_attn.o_proj.weight", Shape{d, h * dh}, true, false, out_std, unit});
}

void GroupedQueryAttention::declare_norm(ParamRegistry& params) {
  const std::int64_t d = geo_.d_model;
  const std::string p = layer_prefix(layer_);
  const UnitId unit = unit_;
  ln1_ = params.declare({p + "input_layernorm.weight", Shape{d}, false, false, 0.0, unit});
}

std::vector<ActivationSpec> GroupedQueryAttention::activations(std::int64_t max_batch, DType c) const {
  const std::int64_t n = geo_.tokens(max_batch), r = geo_.rows(n), d = geo_.d_model, h = geo_.heads;
  return {{"ln1_rstd", Shape{r}, DType::f32},
          {"ln1_out", Shape{r, d}, c, /*cheap=*/true},
          {"qkv", Shape{n, geo_.qkv_width()}, c},
          {"attention_out", Shape{n, h * geo_.head_dim}, c},
          {"attention_lse", Shape{n * h}, DType::f32}};
}

std::vector<ActivationSpec> GroupedQueryAttention::deferred(std::int64_t max_batch, DType c) const {
  const std::int64_t n = geo_.tokens(max_batch);
  return {{"grad.o_out", Shape{n, geo_.d_model}, c}, {"grad.qkv", Shape{n, geo_.qkv_width()}, c}};
}

std::vector<ActivationSpec> GroupedQueryAttention::workspace(std::int64_t max_batch, DType c) const {
  const std::int64_t n = geo_.tokens(max_batch), hd = geo_.heads * geo_.head_dim;
  const std::int64_t kv = 2 * geo_.kv_heads * geo_.head_dim;
  std::vector<ActivationSpec> specs{{"grad.attention_out", Shape{n, hd}, c}, {"grad.qkv", Shape{n, geo_.qkv_width()}, c}};
  if (geo_.context.size > 1) {  // the ring's blocks in flight and its fp32 sums
    const DType f = DType::f32;
    specs.insert(specs.end(), {{"ring.kv", Shape{n, kv}, c},
                               {"ring.kv_next", Shape{n, kv}, c},
                               {"ring.block_out", Shape{n, hd}, f},
                               {"ring.block_lse", Shape{n * geo_.heads}, f},
                               {"ring.grad_q", Shape{n, hd}, f},
                               {"ring.grad_kv", Shape{n, kv}, f},
                               {"ring.grad_kv_next", Shape{n, kv}, f}});
    if (c != f) specs.push_back({"ring.out_sum", Shape{n, hd}, f});  // fp32 activations sum in place
  }
  return specs;
}

ActivationSpec GroupedQueryAttention::kv_cache(DType c) const {
  return {"kv", Shape{geo_.seq, 2 * geo_.kv_heads * geo_.head_dim}, c};
}

std::vector<ActivationSpec> GroupedQueryAttention::decode_activations(DType c) const {
  const std::int64_t s = geo_.seq, hd = geo_.heads * geo_.head_dim;
  std::vector<ActivationSpec> specs{{"ln1_rstd", Shape{s}, DType::f32},
                                    {"ln1_out", Shape{s, geo_.d_model}, c},
                                    {"qkv", Shape{s, geo_.qkv_width()}, c},
                                    {"attention_out", Shape{s, hd}, c},
                                    {"attention_lse", Shape{s * geo_.heads}, DType::f32}};
  if (c != DType::f32) specs.push_back({"attention_sum", Shape{s, hd}, DType::f32});  // the block op's fp32 result
  return specs;
}

GroupedQueryAttention::Views GroupedQueryAttention::views(const SubLayerMemory& m) const {
  const std::int64_t B = m.batch, S = m.seq, n = B * S, r = geo_.rows(n);
  const auto bsw = [&](const Tensor& t) { return first_rows(t, n).view(Shape{B, S, t.shape.last()}); };
  Views v;
  v.ln1_rstd = first_rows(m.activations.at(0), r);
  v.ln1_out = first_rows(m.activations.at(1), r);
  v.qkv = bsw(m.activations.at(2));
  v.att = bsw(m.activations.at(3));
  v.lse = first_rows(m.activations.at(4), n * geo_.heads).view(Shape{B, geo_.heads, S});
  v.d_att = bsw(m.workspace.at(0));
  if (m.workspace.size() > 2) {
    const auto& w = m.workspace;
    v.ring = RingBuffers{{w.at(2), w.at(3)}, w.at(4), w.at(5), w.size() > 9 ? w.at(9) : Tensor(), w.at(6),
                         {w.at(7), w.at(8)}};
  }
  v.deferred = !m.deferred.empty();
  if (v.deferred) {
    v.d_o = first_rows(m.deferred.at(0), n);
    v.d_qkv = bsw(m.deferred.at(1));
  } else {
    v.d_qkv = bsw(m.workspace.at(1));
  }
  return v;
}

AttentionMask GroupedQueryAttention::mask(const SubLayerMemory& m) const {
  AttentionMask mask = AttentionMask::causal();
  mask.window = geo_.sliding_window;
  // The ids of the whole windows by absolute position: the ring's every block finds its rows'
  // there (kernels/attention_mask.h), whichever part of the sequence this rank holds.
  mask.q_documents = mask.k_documents = m.documents;
  return mask;
}

Tensor GroupedQueryAttention::forward(Backend& be, const LayerParallel& par, Tensor x, Tensor out,
                                      const SubLayerMemory& m,
                          const BlockScratch& s, const RopeTables& rope) const {
  const Views a = views(m);
  const Shape att2d{a.att.shape.rows(), a.att.shape.last()};
  const Shape qkv2d{a.qkv.shape.rows(), a.qkv.shape.last()};
  be.rmsnorm_forward(a.ln1_out, a.ln1_rstd, x, params_[ln1_].value, eps_);  // (R, D)
  const Tensor ln1 = par.tp.gather(a.ln1_out, s.gathered);                 // (N, D)
  be.linear_forward(a.qkv.view(qkv2d), ln1, params_.packed_value(q_, v_));  // (N, W)
  be.rope_forward(a.qkv, rope.cos, rope.sin, n_heads_ + n_kv_heads_, head_dim_);
  par.cp.forward(be, a.att, a.lse, a.qkv, mask(m), n_heads_, n_kv_heads_, a.ring);  // (B, S, H Dh)
  be.linear_forward(s.branch, a.att.view(att2d), params_[o_].value);  // (N, D), partial over tp
  return par.tp.reduce(s.branch, out);                                // (R, D)
}

void GroupedQueryAttention::backward(Backend& be, const LayerParallel& par, Tensor x, const SubLayerMemory& m,
                         const BlockScratch& s, const RopeTables& rope, Recompute policy) const {
  const Views a = views(m);
  const Shape att2d{a.att.shape.rows(), a.att.shape.last()};
  const Shape qkv2d{a.qkv.shape.rows(), a.qkv.shape.last()};
  if (policy == Recompute::selective) be.rmsnorm_forward(a.ln1_out, a.ln1_rstd, x, params_[ln1_].value, eps_);
  const Tensor d_out = par.tp.gather(s.d_resid, s.d_full);  // (N, D)
  be.linear_backward_input(a.d_att.view(att2d), d_out, params_[o_].value);
  if (a.deferred) be.copy(a.d_o, d_out);
  else be.linear_backward_weight(params_[o_].grad, d_out, a.att.view(att2d));
  par.cp.backward(be, a.d_qkv, a.d_att, a.qkv, a.att, a.lse, mask(m), n_heads_, n_kv_heads_, a.ring);
  be.rope_backward(a.d_qkv, rope.cos, rope.sin, n_heads_ + n_kv_heads_, head_dim_);
  const Tensor d_part = par.tp.partial_buffer(s.d_norm, s.d_full);
  be.linear_backward_input(d_part, a.d_qkv.view(qkv2d), params_.packed_value(q_, v_));
  if (!a.deferred)  // ln1 gathered again: only this rank's rows were kept
    be.linear_backward_weight(params_.packed_grad(q_, v_), a.d_qkv.view(qkv2d), par.tp.gather(a.ln1_out, s.gathered));
  const Tensor d_ln1 = par.tp.reduce(d_part, s.d_norm);  // (R, D)
  be.rmsnorm_backward(s.d_branch, params_[ln1_].grad, d_ln1, x, params_[ln1_].value, a.ln1_rstd);
}

void GroupedQueryAttention::backward_weight(Backend& be, const LayerParallel& par, const SubLayerMemory& m,
                                const BlockScratch& s) const {
  const Views a = views(m);
  const Shape att2d{a.att.shape.rows(), a.att.shape.last()};
  const Shape qkv2d{a.d_qkv.shape.rows(), a.d_qkv.shape.last()};
  be.linear_backward_weight(params_[o_].grad, a.d_o, a.att.view(att2d));
  be.linear_backward_weight(params_.packed_grad(q_, v_), a.d_qkv.view(qkv2d), par.tp.gather(a.ln1_out, s.gathered));
}

Tensor GroupedQueryAttention::decode(Backend& be, Tensor x, const AttentionDecode& d, const BlockScratch& s) const {
  const std::int64_t n = d.count, end = d.past + n, hd = geo_.heads * geo_.head_dim, kw = d.kv.shape.last();
  const std::vector<Tensor>& t = d.activations;
  const Tensor ln1_rstd = first_rows(t.at(0), n), ln1_out = first_rows(t.at(1), n);  // (n), (n, D)
  const Tensor qkv = first_rows(t.at(2), n);                                         // (n, W)
  const Tensor qkv3 = qkv.view(Shape{1, n, qkv.shape.last()});
  const Tensor att = first_rows(t.at(3), n);                                         // (n, H Dh)
  const Tensor sum = t.size() > 5 ? first_rows(t.at(5), n) : att;                    // (n, H Dh) fp32
  const Tensor lse = first_rows(t.at(4), n * geo_.heads).view(Shape{1, geo_.heads, n});
  be.rmsnorm_forward(ln1_out, ln1_rstd, x, params_[ln1_].value, eps_);
  be.linear_forward(qkv, ln1_out, params_.packed_value(q_, v_));
  be.rope_forward(qkv3, d.rope.cos, d.rope.sin, n_heads_ + n_kv_heads_, head_dim_);
  be.attention_kv_pack(d.kv.slice(d.past, end).view(Shape{1, n, kw}), qkv3, n_heads_, n_kv_heads_);
  // The new queries end where the cached keys end: causal, within the window if any.
  AttentionMask mask = AttentionMask::causal();
  mask.window = d.window;
  mask.q_first = d.first + d.past;
  mask.k_first = d.first;
  be.attention_block_forward(sum.view(Shape{1, n, hd}), lse, qkv3, SeqRange{0, n},
                             d.kv.view(Shape{1, d.kv.shape.rows(), kw}), SeqRange{0, end}, mask, n_heads_, n_kv_heads_);
  if (sum.data != att.data) be.convert(att, sum);
  const Tensor out = first_rows(s.branch, n);  // (n, D)
  be.linear_forward(out, att, params_[o_].value);
  return out;
}

}  // namespace ustrain
