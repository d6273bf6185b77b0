// Host buffers for the token ids of a step's micro-batches, which the model copies to the
// device: from Backend::allocate_host_staging (page-locked on CUDA, so the copies run at the
// bus's full speed; plain memory on the CPU), allocated once for the run rather than per step.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "core/distributed/pipeline_executor.h"
#include "kernels/backend.h"

namespace ustrain {

class TokenStaging {
 public:
  // Room for `micro_batches` micro-batches of `tokens` ids and as many targets each; `what`
  // names them in messages.
  TokenStaging(Backend& backend, std::size_t micro_batches, std::int64_t tokens, const char* what);

  // Copies micro-batch `m`'s inputs and targets (`tokens` ids each) into its place.
  void put(std::size_t m, std::span<const std::int32_t> inputs, std::span<const std::int32_t> targets);
  // The first `n` micro-batches' views, as put() left them.
  std::span<const MicroBatchTokens> tokens(std::size_t n) const;

 private:
  std::size_t micro_batches_;
  std::size_t tokens_;
  HostStaging host_;  // (micro_batches, 2, tokens): each micro-batch's inputs, then its targets
  std::vector<MicroBatchTokens> views_;
};

}  // namespace ustrain
