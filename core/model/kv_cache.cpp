#include "core/model/kv_cache.h"

#include "core/model/llama.h"
#include "core/model/rope_frequencies.h"

namespace ustrain {

KvCache::KvCache(const LlamaModel& model, Backend& be) {
  const ModelGeometry& geo = model.geometry();
  const DType c = model.compute_dtype();
  const std::int64_t s = geo.seq, d = geo.d_model;
  capacity_ = s;
  const auto act = MemCategory::activations;
  const auto add = [&](const std::string& name, const ActivationSpec& a) {
    return plan_.add("kv_cache." + name + a.name, act, a.shape, a.dtype);
  };
  const auto add_all = [&](const std::string& name, const std::vector<ActivationSpec>& specs) {
    std::vector<int> handles;
    for (const ActivationSpec& a : specs) handles.push_back(add(name, a));
    return handles;
  };
  const std::vector<TransformerBlock>& blocks = model.blocks();
  for (const TransformerBlock& b : blocks) {
    kv_.push_back(add("layers." + std::to_string(kv_.size()) + ".", b.attention().kv_cache(c)));
    const std::string kind = b.mlp().kind();
    mlp_kind_.push_back(kind);
    if (mlp_activations_.contains(kind)) continue;
    mlp_activations_[kind] = add_all(kind + ".", b.mlp().activations(1, c));
    mlp_workspace_[kind] = add_all(kind + ".workspace.", b.mlp().workspace(1, c));
  }
  attention_ = add_all("", blocks.front().attention().decode_activations(c));
  rope_cos_ = add("", {"rope.cos", Shape{s, geo.head_dim / 2}, DType::f32});
  rope_sin_ = add("", {"rope.sin", Shape{s, geo.head_dim / 2}, DType::f32});
  ids_ = add("", {"input_ids", Shape{s}, DType::i32});
  x_mid_ = add("", {"x_mid", Shape{s, d}, c});
  branch_ = add("", {"branch_out", Shape{s, d}, c});
  residual_[0] = add("", {"residual.0", Shape{s, d}, c});
  residual_[1] = add("", {"residual.1", Shape{s, d}, c});
  final_out_ = add("", {"final_norm.out", Shape{1, d}, c});
  final_rstd_ = add("", {"final_norm.rstd", Shape{1}, DType::f32});
  logits_ = add("", {"logits", Shape{1, geo.vocab_local}, c});
  memory_ = std::make_unique<PlannedMemory>(plan_, be);
  // The tables the model's forward fills for a whole sequence on one rank.
  be.rope_tables(memory_->tensor(rope_cos_), memory_->tensor(rope_sin_),
                 rope_inverse_frequencies(model.config(), geo.head_dim), 0);
}

std::vector<Tensor> KvCache::tensors(const std::vector<int>& handles) const {
  std::vector<Tensor> t;
  for (int h : handles) t.push_back(memory_->tensor(h));
  return t;
}

Tensor KvCache::ids(std::int64_t count) const { return first_rows(memory_->tensor(ids_), count); }

Tensor KvCache::residual(int which, std::int64_t count) const {
  return first_rows(memory_->tensor(residual_[which]), count);
}

BlockDecode KvCache::layer(int layer, std::int64_t count) const {
  const std::int64_t end = length_ + count;
  const std::string& kind = mlp_kind_.at(static_cast<std::size_t>(layer));
  BlockDecode m;
  m.attention = {length_, count, memory_->tensor(kv_.at(static_cast<std::size_t>(layer))),
                 {memory_->tensor(rope_cos_).slice(length_, end), memory_->tensor(rope_sin_).slice(length_, end)},
                 tensors(attention_)};
  m.mlp = {1, count, tensors(mlp_activations_.at(kind)), {}, tensors(mlp_workspace_.at(kind))};
  m.x_mid = first_rows(memory_->tensor(x_mid_), count);
  return m;
}

BlockScratch KvCache::scratch(std::int64_t count) const {
  BlockScratch s;
  s.branch = first_rows(memory_->tensor(branch_), count);
  return s;
}

void KvCache::advance(std::int64_t count) {
  USTRAIN_ASSERT(count >= 0 && length_ + count <= capacity_, "the key/value cache is full");
  length_ += count;
}

}  // namespace ustrain
