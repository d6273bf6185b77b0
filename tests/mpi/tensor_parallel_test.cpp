// Tensor and sequence parallelism on 2, 3 and 4 ranks against one rank, forward and backward:
// the paired gather/reduce operations, the vocabulary-parallel embedding and loss (the
// vocabulary of 13 is padded on every group size but 1), and the whole model, whose loss and
// gradients (each rank's box of each parameter) must equal the unsharded model's.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/distributed/gradient_sync.h"
#include "core/model/llama.h"
#include "parallel/process_groups.h"
#include "parallel/tensor_parallel.h"
#include "tests/mpi/mpi_test_world.h"
#include "tests/mpi/tiny_model.h"
#include "tests/unit/kernels/reference.h"

namespace ustrain {
namespace {

using mpi_test::TinyModel;
using mpi_test::world;

// Every rank draws the same global inputs from the same seeds.
std::vector<float> global_floats(std::int64_t n, std::uint32_t seed) {
  return test::random_floats(static_cast<std::size_t>(n), seed);
}

TEST(TensorParallelRegion, GatherAndReduceAreTheirSerialCounterparts) {
  auto tp_comm = world().everyone();
  const int p = tp_comm->size(), r = tp_comm->rank();
  const std::int64_t rows = 6 * p, cols = 5;
  for (bool sp : {false, true}) {
    SCOPED_TRACE(sp ? "sequence parallel" : "tensor parallel");
    TensorParallel tp(*tp_comm, sp, VocabShard{});
    // reduce: the sum of every rank's partial (rows, cols), as this rank's rows.
    std::vector<float> partial = global_floats(rows * cols, 100 + static_cast<std::uint32_t>(r));
    std::vector<double> want(static_cast<std::size_t>(rows * cols), 0.0);
    for (int q = 0; q < p; ++q) {
      const std::vector<float> theirs = global_floats(rows * cols, 100 + static_cast<std::uint32_t>(q));
      for (std::size_t i = 0; i < want.size(); ++i) want[i] += theirs[i];
    }
    const std::int64_t mine = sp ? rows / p : rows;
    std::vector<float> local(static_cast<std::size_t>(mine * cols));
    const Tensor out = tp.reduce(Tensor(partial.data(), Shape{rows, cols}), Tensor(local.data(), Shape{mine, cols}));
    ASSERT_EQ(out.shape, (Shape{mine, cols}));
    const std::int64_t first = sp ? r * mine : 0;
    for (std::int64_t i = 0; i < mine * cols; ++i) EXPECT_NEAR(out.f32()[i], want[static_cast<std::size_t>(first * cols + i)], 1e-5);
    // gather: every rank's rows in rank order (without sp, the tensor itself).
    std::vector<float> scratch(static_cast<std::size_t>(rows * cols));
    const Tensor full = tp.gather(out, Tensor(scratch.data(), Shape{rows, cols}));
    ASSERT_EQ(full.shape, (Shape{rows, cols}));
    for (std::int64_t i = 0; i < rows * cols; ++i) EXPECT_NEAR(full.f32()[i], want[static_cast<std::size_t>(i)], 1e-5);
    if (!sp) {
      EXPECT_EQ(full.data, out.data);
      EXPECT_EQ(tp.partial_buffer(out, Tensor(scratch.data(), Shape{rows, cols})).data, out.data);
    }
  }
}

// A vocabulary of 13 split like the geometry splits it.
VocabShard shard_of(int rank, int ranks, std::int64_t vocab, std::int64_t* width) {
  *width = (vocab + ranks - 1) / ranks;
  const std::int64_t begin = *width * rank;
  return {begin, std::clamp<std::int64_t>(vocab - begin, 0, *width)};
}

TEST(TensorParallelVocab, EmbeddingAndLossEqualTheUnshardedOps) {
  auto tp_comm = world().everyone();
  const int p = tp_comm->size(), r = tp_comm->rank();
  CpuBackend cpu(1);
  const std::int64_t vocab = 13, dim = 4, n = 4 * p;
  std::int64_t width = 0;
  const VocabShard shard = shard_of(r, p, vocab, &width);
  std::vector<float> table = global_floats(vocab * dim, 7), dout = global_floats(n * dim, 8);
  std::vector<float> logits = global_floats(n * vocab, 9);
  std::vector<std::int32_t> ids = test::random_ids(static_cast<std::size_t>(n), static_cast<std::int32_t>(vocab), 10);
  std::vector<std::int32_t> targets = test::random_ids(static_cast<std::size_t>(n), static_cast<std::int32_t>(vocab), 11);
  targets[1] = -1;
  // One rank's answers.
  std::vector<float> emb(static_cast<std::size_t>(n * dim)), dtable(table.size(), 0.0f);
  cpu.embedding_forward(test::f32(emb, {n, dim}), test::i32(ids, {n}), test::f32(table, {vocab, dim}));
  cpu.embedding_backward(test::f32(dtable, {vocab, dim}), test::i32(ids, {n}), test::f32(dout, {n, dim}));
  std::vector<float> losses(static_cast<std::size_t>(n)), lse(losses.size()), dlogits(logits.size());
  cpu.cross_entropy_forward(test::f32(losses, {n}), test::f32(lse, {n}), test::f32(logits, {n, vocab}),
                            test::i32(targets, {n}));
  cpu.cross_entropy_backward(test::f32(dlogits, {n, vocab}), test::f32(logits, {n, vocab}), test::f32(lse, {n}),
                             test::i32(targets, {n}), 0.5f);

  for (bool sp : {false, true}) {
    SCOPED_TRACE(sp ? "sequence parallel" : "tensor parallel");
    TensorParallel tp(*tp_comm, sp, shard);
    const std::int64_t mine = sp ? n / p : n, first = sp ? r * mine : 0;
    // This rank's rows of the table, padded with rows no id reaches.
    std::vector<float> rows(static_cast<std::size_t>(width * dim), 99.0f);
    std::copy_n(table.begin() + shard.begin * dim, shard.valid * dim, rows.begin());
    std::vector<float> out(static_cast<std::size_t>(mine * dim)), scratch(static_cast<std::size_t>(n * dim));
    tp.embed(cpu, test::f32(out, {mine, dim}), test::i32(ids, {n}), test::f32(rows, {width, dim}),
             test::f32(scratch, {n, dim}));
    for (std::int64_t i = 0; i < mine * dim; ++i) EXPECT_NEAR(out[static_cast<std::size_t>(i)], emb[static_cast<std::size_t>(first * dim + i)], 1e-6);
    std::vector<float> my_dout(dout.begin() + first * dim, dout.begin() + (first + mine) * dim);
    std::vector<float> drows(rows.size(), 0.0f);
    tp.embed_backward(cpu, test::f32(drows, {width, dim}), test::i32(ids, {n}), test::f32(my_dout, {mine, dim}),
                      test::f32(scratch, {n, dim}));
    for (std::int64_t i = 0; i < width * dim; ++i)
      EXPECT_NEAR(drows[static_cast<std::size_t>(i)], i < shard.valid * dim ? dtable[static_cast<std::size_t>(shard.begin * dim + i)] : 0.0f, 1e-6);

    // The loss: this rank's columns (padding columns large, to be masked), every row.
    std::vector<float> cols(static_cast<std::size_t>(n * width), 40.0f);
    for (std::int64_t row = 0; row < n; ++row)
      std::copy_n(logits.begin() + row * vocab + shard.begin, shard.valid, cols.begin() + row * width);
    std::vector<float> got_losses(losses.size()), got_lse(lse.size()), parts(static_cast<std::size_t>(p * 2 * n));
    tp.loss(cpu, test::f32(got_losses, {n}), test::f32(got_lse, {n}), test::f32(cols, {n, width}), test::i32(targets, {n}),
            test::f32(parts, {p, 2, n}));
    EXPECT_LT(test::rel_error(got_losses, test::to_double(losses)), 1e-6);
    EXPECT_LT(test::rel_error(got_lse, test::to_double(lse)), 1e-6);
    tp.loss_backward(cpu, test::f32(cols, {n, width}), test::f32(cols, {n, width}), test::f32(got_lse, {n}),
                     test::i32(targets, {n}), 0.5f);
    for (std::int64_t row = 0; row < n; ++row)
      for (std::int64_t c = 0; c < width; ++c)
        EXPECT_NEAR(cols[static_cast<std::size_t>(row * width + c)],
                    c < shard.valid ? dlogits[static_cast<std::size_t>(row * vocab + shard.begin + c)] : 0.0f, 1e-6);
  }
}

// A model every group size splits: 2p heads, p kv heads, an MLP of 8p, sequences of 12.
ModelSection model_for(int p, bool tied) {
  ModelSection m = mpi_test::tiny_model_config(tied);
  m.n_heads = 2 * p;
  m.n_kv_heads = p;
  m.d_model = 4 * m.n_heads;
  m.ffn_hidden = 8 * p;
  m.max_seq_len = 12;
  return m;
}

constexpr std::uint64_t kSeed = 3;

TEST(TensorParallelModel, LossAndGradientsEqualOneRank) {
  ProcessGroup tp_group("tp", world().everyone());
  ProcessGroup everyone("world", world().everyone());
  const int p = tp_group.size(), r = tp_group.rank();
  constexpr std::int64_t B = 2, S = 12;
  std::vector<std::int32_t> ids = test::random_ids(B * S, 13, 20), targets = test::random_ids(B * S, 13, 21);
  for (bool tied : {false, true})
    for (bool sp : {false, true})
      for (Recompute policy : {Recompute::none, Recompute::selective, Recompute::full}) {
        SCOPED_TRACE(std::string(sp ? "sp" : "no sp") + (tied ? ", tied" : "") + ", recompute " + recompute_name(policy));
        const ModelSection cfg = model_for(p, tied);
        TinyModel whole(cfg, B, S, policy, {}, kSeed);
        const double want = whole.model.forward(*whole.backend, {ids, targets}, B, S);
        whole.model.backward(*whole.backend, 1.0f / (B * S));

        const ModelGeometry geometry = ModelGeometry::of(cfg, ModelSplit{p, r, sp}, S);
        TensorParallel tp(tp_group.host(), sp, VocabShard{geometry.vocab_begin, geometry.vocab_valid});
        RingAttention no_cp;
        ExpertDispatcher no_ep;
        TinyModel split(cfg, geometry, B, policy, {.parallel = LayerParallel{tp, no_cp, no_ep}}, kSeed);
        const double got = split.model.forward(*split.backend, {ids, targets}, B, S);
        split.model.backward(*split.backend, 1.0f / (B * S));
        sum_partial_grads(split.model.params(), tp_group);
        EXPECT_NEAR(got, want, 1e-5 * std::abs(want));

        // Each parameter's box on this rank against the same box of the whole gradient.
        const ModelParams& params = split.model.params();
        for (std::size_t i = 0; i < params.specs().size(); ++i) {
          const ParamSpec& s = params.specs()[i];
          const Tensor g = params[static_cast<int>(i)].grad, w = whole.model.params()[static_cast<int>(i)].grad;
          const std::int64_t cols = s.local.rank() == 2 ? s.local[1] : s.local[0];
          const std::int64_t global_cols = s.shape.rank() == 2 ? s.shape[1] : s.shape[0];
          double diff = 0, norm = 0;
          for (std::int64_t e = 0; e < s.local.numel(); ++e) {
            const std::int64_t row = s.local.rank() == 2 ? e / cols : 0, col = s.local.rank() == 2 ? e % cols : e;
            const bool padding = row >= s.box[0];
            const double expected = padding ? 0.0 :
                w.f32()[s.local.rank() == 2 ? (s.box_begin[0] + row) * global_cols + s.box_begin[1] + col : col];
            diff += (g.f32()[e] - expected) * (g.f32()[e] - expected);
            norm += expected * expected;
          }
          EXPECT_LT(std::sqrt(diff / std::max(norm, 1e-30)), 1e-5) << s.name << " on rank " << r;
        }
        // The gradient norm counts every element once.
        const double norm = grad_sum_of_squares(params, *split.backend, everyone);
        EXPECT_NEAR(norm, whole.backend->sum_of_squares(whole.model.params().dense().all_grads()), 1e-5 * norm);
      }
}

}  // namespace
}  // namespace ustrain
