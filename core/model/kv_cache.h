// The memory of decoding one sequence a few positions at a time (sampling: LlamaModel::decode,
// never training): per layer, the keys (after RoPE) and values of every position so far, and
// the scratch one decode step works in, shared by the layers. Positions start at 0 and the cache
// holds at most S of them, the model's sequence length: a longer sequence starts over (clear()).
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

  std::int64_t length() const { return length_; }      // positions cached
  std::int64_t capacity() const { return capacity_; }  // S
  void clear() { length_ = 0; }

  // For LlamaModel::decode, a step of `count` new positions after length():
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

  std::int64_t capacity_ = 0, length_ = 0;
  std::vector<int> kv_;                     // per layer (S, 2 Hkv Dh)
  std::vector<std::string> mlp_kind_;       // per layer
  std::vector<int> attention_;              // Attention::decode_activations()
  std::map<std::string, std::vector<int>> mlp_activations_, mlp_workspace_;  // per kind of MLP
  int rope_cos_ = -1, rope_sin_ = -1;       // (S, Dh / 2) for positions 0 .. S - 1
  int ids_ = -1, x_mid_ = -1, branch_ = -1;  // (S), (S, D), (S, D)
  int residual_[2] = {-1, -1};              // (S, D): a layer's input and output, in turn
  int final_out_ = -1, final_rstd_ = -1, logits_ = -1;
  MemoryPlan plan_;
  std::unique_ptr<PlannedMemory> memory_;
};

}  // namespace ustrain
