// Embedding lookup and its deterministic scatter-add backward.
#include <gtest/gtest.h>

#include "tests/unit/kernels/reference.h"

namespace ustrain {
namespace {

using test::random_floats;
using test::random_ids;

TEST(CpuEmbedding, ForwardCopiesTheRowsOfTheIds) {
  CpuBackend cpu(2);
  for (auto [n, vocab, dim] : {std::tuple{1, 1, 1}, {7, 31, 13}, {300, 50, 200}}) {
    auto table = random_floats(static_cast<std::size_t>(vocab * dim), 1);
    auto ids = random_ids(static_cast<std::size_t>(n), vocab, 2);
    std::vector<float> out(static_cast<std::size_t>(n * dim));
    cpu.embedding_forward(Tensor(out.data(), {n, dim}), test::i32(ids, {n}), test::f32(table, {vocab, dim}));
    for (int i = 0; i < n; ++i)
      for (int c = 0; c < dim; ++c) ASSERT_EQ(out[i * dim + c], table[ids[i] * dim + c]);
  }
}

TEST(CpuEmbedding, BackwardAccumulatesRepeatedIdsExactly) {
  CpuBackend cpu(2);
  const int n = 41, vocab = 5, dim = 131;  // many repeats; three column blocks
  auto ids = random_ids(n, vocab, 3);
  // Multiples of 1/8 of small size: every partial sum is exact in float, whatever the order.
  std::vector<float> dout(static_cast<std::size_t>(n * dim)), dtable(static_cast<std::size_t>(vocab * dim));
  for (std::size_t k = 0; k < dout.size(); ++k) dout[k] = static_cast<float>(static_cast<int>(k * 7 % 23) - 11) / 8.0f;
  for (std::size_t k = 0; k < dtable.size(); ++k) dtable[k] = static_cast<float>(k % 5) + 0.5f;
  std::vector<double> want(dtable.begin(), dtable.end());
  for (int i = 0; i < n; ++i)
    for (int c = 0; c < dim; ++c)
      want[static_cast<std::size_t>(ids[i] * dim + c)] += dout[static_cast<std::size_t>(i * dim + c)];
  cpu.embedding_backward(test::f32(dtable, {vocab, dim}), test::i32(ids, {n}), test::f32(dout, {n, dim}));
  for (std::size_t k = 0; k < want.size(); ++k) ASSERT_EQ(dtable[k], want[k]) << k;
}

TEST(CpuEmbedding, BackwardMatchesFloat64Reference) {
  CpuBackend cpu(2);
  for (auto [n, vocab, dim] : {std::tuple{1, 1, 1}, {7, 3, 13}, {512, 31, 70}}) {
    auto ids = random_ids(static_cast<std::size_t>(n), vocab, 4);
    auto dout = random_floats(static_cast<std::size_t>(n * dim), 5);
    auto dtable = random_floats(static_cast<std::size_t>(vocab * dim), 6);
    auto want = test::to_double(dtable);
    for (int i = 0; i < n; ++i)
      for (int c = 0; c < dim; ++c)
        want[static_cast<std::size_t>(ids[i] * dim + c)] += dout[static_cast<std::size_t>(i * dim + c)];
    cpu.embedding_backward(test::f32(dtable, {vocab, dim}), test::i32(ids, {n}), test::f32(dout, {n, dim}));
    EXPECT_LT(test::rel_error(dtable, want), test::kForwardTol) << n << " " << vocab << " " << dim;
  }
}

TEST(CpuEmbedding, BackwardIsBitwiseDeterministicAcrossThreadCounts) {
  const int n = 2000, vocab = 7, dim = 300;
  auto ids = random_ids(n, vocab, 7);
  auto dout = random_floats(static_cast<std::size_t>(n * dim), 8);
  auto start = random_floats(static_cast<std::size_t>(vocab * dim), 9);
  std::vector<std::vector<float>> results;
  for (int threads : {1, 2, 3, 2}) {
    auto dtable = start;
    CpuBackend(threads).embedding_backward(test::f32(dtable, {vocab, dim}), test::i32(ids, {n}),
                                           test::f32(dout, {n, dim}));
    results.push_back(dtable);
  }
  for (const auto& r : results) EXPECT_TRUE(test::same_bits(r, results[0]));
}

TEST(CpuEmbedding, IdOutsideTheVocabularyIsRejected) {
  CpuBackend cpu(1);
  std::vector<float> table(6), out(2);
  std::vector<std::int32_t> ids = {3};
  EXPECT_THROW(cpu.embedding_forward(test::f32(out, {1, 2}), test::i32(ids, {1}), test::f32(table, {3, 2})),
               std::logic_error);
  ids[0] = -1;
  EXPECT_THROW(cpu.embedding_backward(test::f32(table, {3, 2}), test::i32(ids, {1}), test::f32(out, {1, 2})),
               std::logic_error);
}

}  // namespace
}  // namespace ustrain
