// Host buffers for the token ids of a step's micro-batches, which the model copies to the
// device: from Backend::allocate_host_staging (page-locked on CUDA, so the copies run at the
// bus's full speed; plain memory on the CPU), allocated once for the run rather than per step.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "kernels/backend.h"
#include "kernels/token_batch.h"

namespace ustrain {

class TokenStaging {
 public:
  // Room for `micro_batches` micro-batches of `tokens` ids and as many targets each, and
  // `documents` document ids (their whole windows', kernels/token_batch.h; 0: none); `what`
  // names them in messages.
  TokenStaging(Backend& backend, std::size_t micro_batches, std::int64_t tokens, const char* what,
               std::int64_t documents = 0);

  // Copies micro-batch `m`'s ids and targets (`tokens` of each), and its document ids when it
  // has them, into its place.
  void put(std::size_t m, const TokenBatch& batch);
  // The first `n` micro-batches' views, as put() left them.
  std::span<const TokenBatch> tokens(std::size_t n) const;

 private:
  std::size_t stride() const { return 2 * tokens_ + documents_; }

  std::size_t micro_batches_;
  std::size_t tokens_, documents_;
  HostStaging host_;  // per micro-batch: its inputs, its targets (tokens each), its documents
  std::vector<TokenBatch> views_;
};

}  // namespace ustrain
