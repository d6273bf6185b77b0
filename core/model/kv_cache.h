// The memory of decoding one sequence a few positions at a time (sampling: LlamaModel::decode,
// never training): per layer, the keys (after RoPE) and values of the positions so far, and
// the scratch one decode step works in, shared by the layers. Positions start at 0.
//
// Without a sliding window the cache holds every position, at most S of them, the model's
// sequence length: a longer sequence starts over (clear()). With model.sliding_window = W a
// query sees only the W - 1 positions before it, so the cache keeps only those: a step takes
// at most C = min(S, W) new positions, the cache holds W - 1 + C rows, and when the next step's
// would not fit, the last W - 1 keys move to its start. Positions then run on past S, their
// RoPE rows made for each step: the window's attention depends only on positions within it.
//
// Sizes: S the model's sequence length, D = d_model, Vs its vocabulary (rows of the head).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/memory/memory_plan.h"
#include "core/model/transformer_block.h"

namespace ustrain {

class LlamaModel;

class KvCache {
 public:
  // For `model`, the whole model on one rank, allocated on its backend `be`.
  KvCache(const LlamaModel& model, Backend& be);
  KvCache(const KvCache&) = delete;
  KvCache& operator=(const KvCache&) = delete;

  std::int64_t length() const { return length_; }      // rows cached
  std::int64_t position() const { return first_ + length_; }  // the next position
  std::int64_t window() const { return window_; }      // model.sliding_window; 0: none
  // The most new positions the next step may take: C with a window, else what is left of S.
  std::int64_t step_limit() const { return window_ > 0 ? step_ : rows_ - length_; }
  void clear() { first_ = length_ = 0; }

  // For LlamaModel::decode, a step of `count` new positions after position(), first:
  // with a window, room for them (the oldest keys dropped) and their RoPE rows.
  void prepare(Backend& be, std::int64_t count);
  // Then:
  Tensor ids(std::int64_t count) const;                       // (count) i32
  Tensor residual(int which, std::int64_t count) const;        // (count, D), which = 0 or 1
  BlockDecode layer(int layer, std::int64_t count) const;       // layer `layer`'s tensors
  BlockScratch scratch(std::int64_t count) const;               // branch (count, D) only
  Tensor final_out() const { return memory_->tensor(final_out_); }    // (1, D): the last position's
  Tensor final_rstd() const { return memory_->tensor(final_rstd_); }  // (1)
  Tensor logits() const { return memory_->tensor(logits_); }          // (1, Vs)
  void advance(std::int64_t count);  // the step's positions are cached

 private:
  std::vector<Tensor> tensors(const std::vector<int>& handles) const;

  std::int64_t window_ = 0, step_ = 0, rows_ = 0;  // W, C and the cached rows' room (S without a window)
  std::int64_t first_ = 0, length_ = 0;            // row 0's position; rows cached
  std::vector<double> inv_freq_;                   // RoPE's, for a window's tables
  std::vector<int> kv_;                     // per layer (rows, 2 Hkv Dh)
  std::vector<std::string> mlp_kind_;       // per layer
  std::vector<int> attention_;              // Attention::decode_activations()
  std::map<std::string, std::vector<int>> mlp_activations_, mlp_workspace_;  // per kind of MLP
  int rope_cos_ = -1, rope_sin_ = -1;       // (S, Dh / 2) for positions 0 .. S - 1; a window's (C, Dh / 2)
  int ids_ = -1, x_mid_ = -1, branch_ = -1;  // (S), (S, D), (S, D)
  int residual_[2] = {-1, -1};              // (S, D): a layer's input and output, in turn
  int final_out_ = -1, final_rstd_ = -1, logits_ = -1;
  MemoryPlan plan_;
  std::unique_ptr<PlannedMemory> memory_;
};

}  // namespace ustrain
