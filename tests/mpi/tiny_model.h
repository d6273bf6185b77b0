// The tiny Llama models of the multi-rank tests: a config small enough to run many times on
// two cores, and one rank's instance of it, built the way training builds one
// (core/step/model_instance.h) and initialised from a seed.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/recipe/recipe.h"
#include "core/step/model_instance.h"
#include "kernels/backend.h"
#include "kernels/token_batch.h"

namespace ustrain::mpi_test {

// The model the tests start from: a vocabulary of 13, d_model 16, 2 layers, 4 heads (2 kv
// heads), an MLP of 24, sequences of up to 6, init_std 0.3. A test changes what its group
// sizes must split.
inline ModelSection tiny_model_config(bool tied_embeddings) {
  ModelSection m;
  m.vocab_size = 13;
  m.d_model = 16;
  m.n_layers = 2;
  m.n_heads = 4;
  m.n_kv_heads = 2;
  m.ffn_hidden = 24;
  m.max_seq_len = 6;
  m.init_std = 0.3;
  m.tied_embeddings = tied_embeddings;
  return m;
}

// One rank's model in fp32 on a one-thread CPU backend: placed (the whole model, or the part
// of it `geometry` names, sequences included), planned for micro-batches of `batch` sequences,
// allocated, bound, and initialised from `seed`; the same seed on every rank gives identical
// replicas.
struct TinyModel : ModelInstance {
  TinyModel(const ModelSection& cfg, const ModelGeometry& geometry, std::int64_t batch, Recompute policy,
            const ModelPlacement& placement, std::uint64_t seed)
      : ModelInstance(recipe_of(cfg), geometry, batch, policy, placement, make_backend(Device::cpu, 1)) {
    model.initialise(*backend, seed);
  }
  // The whole model, for sequences of `seq`.
  TinyModel(const ModelSection& cfg, std::int64_t batch, std::int64_t seq, Recompute policy,
            const ModelPlacement& placement, std::uint64_t seed)
      : TinyModel(cfg, ModelGeometry::of(cfg, {}, seq), batch, policy, placement, seed) {}

 private:
  static Recipe recipe_of(const ModelSection& cfg) {
    Recipe recipe;  // fp32 on the CPU by default
    recipe.model = cfg;
    return recipe;
  }
};

// Tokens [first, first + count) of host ids and targets as one batch.
inline TokenBatch slice_of(const std::vector<std::int32_t>& ids, const std::vector<std::int32_t>& targets,
                           std::int64_t first, std::int64_t count) {
  const auto f = static_cast<std::size_t>(first), n = static_cast<std::size_t>(count);
  return {std::span(ids).subspan(f, n), std::span(targets).subspan(f, n)};
}

}  // namespace ustrain::mpi_test
