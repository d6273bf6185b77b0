#include "core/model/kv_cache.h"

#include <algorithm>

#include "core/model/llama.h"
#include "core/model/rope_frequencies.h"

namespace ustrain {

KvCache::KvCache(const LlamaModel& model, Backend& be) {
  const ModelGeometry& geo = model.geometry();
  const DType c = model.compute_dtype();
  const std::int64_t s = geo.seq, d = geo.d_model;
  window_ = model.config().sliding_window;
  step_ = window_ > 0 ? std::min(s, window_) : s;
  rows_ = window_ > 0 ? window_ - 1 + step_ : s;
  inv_freq_ = rope_inverse_frequencies(model.config(), geo.head_dim);
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
    ActivationSpec kv = b.attention().kv_cache(c);  // (S, 2 Hkv Dh)
    kv.shape = Shape{rows_, kv.shape.last()};
    kv_.push_back(add("layers." + std::to_string(kv_.size()) + ".", kv));
    const std::string kind = b.mlp().kind();
    mlp_kind_.push_back(kind);
    if (mlp_activations_.contains(kind)) continue;
    mlp_activations_[kind] = add_all(kind + ".", b.mlp().activations(1, c));
    mlp_workspace_[kind] = add_all(kind + ".workspace.", b.mlp().workspace(1, c));
  }
  attention_ = add_all("", blocks.front().attention().decode_activations(c));
  rope_cos_ = add("", {"rope.cos", Shape{step_, geo.head_dim / 2}, DType::f32});
  rope_sin_ = add("", {"rope.sin", Shape{step_, geo.head_dim / 2}, DType::f32});
  ids_ = add("", {"input_ids", Shape{s}, DType::i32});
  x_mid_ = add("", {"x_mid", Shape{s, d}, c});
  branch_ = add("", {"branch_out", Shape{s, d}, c});
  residual_[0] = add("", {"residual.0", Shape{s, d}, c});
  residual_[1] = add("", {"residual.1", Shape{s, d}, c});
  final_out_ = add("", {"final_norm.out", Shape{1, d}, c});
  final_rstd_ = add("", {"final_norm.rstd", Shape{1}, DType::f32});
  logits_ = add("", {"logits", Shape{1, geo.vocab_local}, c});
  memory_ = std::make_unique<PlannedMemory>(plan_, be);
  // The tables the model's forward fills for a whole sequence on one rank (a window's, each step).
  if (window_ == 0) be.rope_tables(memory_->tensor(rope_cos_), memory_->tensor(rope_sin_), inv_freq_, 0);
}

void KvCache::prepare(Backend& be, std::int64_t count) {
  USTRAIN_ASSERT(count >= 1 && count <= step_limit(), "a decode step past the key/value cache's end");
  if (window_ == 0) return;
  if (length_ + count > rows_) {  // keep the W - 1 keys the next positions may see
    const std::int64_t keep = std::min(window_ - 1, length_), from = length_ - keep;
    // In pieces of at most `from` rows, each piece's source lies past its destination: no overlap.
    for (int h : kv_) {
      const Tensor kv = memory_->tensor(h);
      for (std::int64_t done = 0; done < keep; done += from) {
        const std::int64_t n = std::min(from, keep - done);
        be.copy(kv.slice(done, done + n), kv.slice(from + done, from + done + n));
      }
    }
    first_ += from;
    length_ = keep;
  }
  be.rope_tables(first_rows(memory_->tensor(rope_cos_), count), first_rows(memory_->tensor(rope_sin_), count),
                 inv_freq_, position());
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
  const std::string& kind = mlp_kind_.at(static_cast<std::size_t>(layer));
  BlockDecode m;
  // A window's tables hold this step's rows alone; the whole sequence's are sliced.
  const std::int64_t rope_first = window_ > 0 ? 0 : length_;
  const std::int64_t rope_end = rope_first + count;
  m.attention = {length_,
                 count,
                 memory_->tensor(kv_.at(static_cast<std::size_t>(layer))),
                 {memory_->tensor(rope_cos_).slice(rope_first, rope_end),
                  memory_->tensor(rope_sin_).slice(rope_first, rope_end)},
                 tensors(attention_),
                 first_,
                 window_};
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
  USTRAIN_ASSERT(count >= 0 && length_ + count <= rows_, "the key/value cache is full");
  length_ += count;
}

}  // namespace ustrain
