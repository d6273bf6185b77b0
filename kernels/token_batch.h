// A batch of token sequences on the host: what the data loader reads and the model's first
// and last pipeline stages consume (embedding and loss), one named type on the whole way.
#pragma once

#include <cstdint>
#include <span>

namespace ustrain {

// B sequences of S tokens each, every field (B, S) row-major but documents (whole windows).
// A view: the memory belongs to whoever made the batch (the loader's prefetch buffers, the
// trainer's token staging) and stays valid as long as its maker says.
struct TokenBatch {
  TokenBatch() = default;
  TokenBatch(std::span<const std::int32_t> ids, std::span<const std::int32_t> targets) : ids(ids), targets(targets) {}

  std::span<const std::int32_t> ids;      // the input tokens
  std::span<const std::int32_t> targets;  // the ids shifted by one token; a target < 0 is ignored
  // Document masking (train.document_mask): the document of each token of the whole windows,
  // (B, seq_len) by position, numbered within each window (data/document_ids.h): under context
  // parallelism the ids and targets are this process's parts of the windows, and attention
  // meets the keys of every part. Empty means one document per sequence.
  std::span<const std::int32_t> documents;
  // Reserved and not read yet: each token's position in its sequence (RoPE's, continuous
  // through the window whatever the documents). Empty means positions 0 .. S - 1.
  std::span<const std::int32_t> positions;
};

}  // namespace ustrain
