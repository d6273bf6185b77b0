// The logits of the token after a growing text (`ustrain generate`): the model's forward of the
// text's last S = model.max_seq_len tokens at positions 0 .. S - 1, the whole model on one rank.
//
// While the text fits in S tokens a key/value cache (core/model/kv_cache.h) keeps every layer's
// keys and values, so that each new token costs the forward of one position. Past S the window
// slides with every token: each kept token's position, and the tokens it attends to, change, so
// nothing cached stays valid and each step runs the whole window's forward, as without a cache.
// A model with a sliding window (model.sliding_window) is never cut: its cache keeps the keys
// its window sees, and positions run on past S.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/model/kv_cache.h"
#include "core/model/llama.h"

namespace ustrain {

class Decoder {
 public:
  // `model` planned for at least one sequence of its geometry's length, bound on `be`.
  Decoder(LlamaModel& model, Backend& be);

  // The logits (1, V) on the device of the token after `ids`, the whole text so far (at least
  // one token), valid until the next call. A text that extends the previous call's decodes only
  // its new tokens; any other starts the cache over.
  Tensor next(std::span<const std::int32_t> ids);
  // Whether the last call saw only the last S tokens of its text.
  bool windowed() const { return windowed_; }

 private:
  LlamaModel& model_;
  Backend& be_;
  KvCache cache_;
  std::vector<std::int32_t> cached_;               // the tokens whose keys and values the cache holds
  std::vector<std::int32_t> window_, no_targets_;  // a sliding window's forward
  bool windowed_ = false;
};

}  // namespace ustrain
