// ZeRO's memory per rank against the Playbook's per-stage formulas (fp32 on the CPU: 4 bytes
// per value and per gradient, 8 for AdamW's two moments), and the split of the state into
// chunks that the ranks own.
#include <gtest/gtest.h>

#include <map>
#include <vector>

#include "core/checkpoint/slices.h"
#include "core/model/llama.h"

namespace ustrain {
namespace {

ModelSection small_model() {
  ModelSection m;
  m.vocab_size = 50;
  m.d_model = 16;
  m.n_layers = 3;
  m.n_heads = 4;
  m.n_kv_heads = 2;
  m.ffn_hidden = 40;
  m.max_seq_len = 8;
  return m;
}

struct Planned {
  LlamaModel model{small_model(), 1, 8, Recompute::none};
  MemoryPlan plan;
  explicit Planned(ParamSharding s) { model.plan(plan, s); }
};

TEST(ZeroMemory, PerRankBytesFollowThePlaybookFormulas) {
  for (int n : {1, 2, 4, 8})
    for (int zero = 0; zero <= 3; ++zero) {
      SCOPED_TRACE(testing::Message() << "dp " << n << ", ZeRO stage " << zero);
      Planned p(ParamSharding{n, n - 1, zero});
      const ParamStore& params = p.model.params().dense();
      ASSERT_EQ(p.model.params().stores().size(), 1u);  // a dense model: one store
      const auto psi = static_cast<std::size_t>(params.flat_size());
      const auto count = static_cast<std::size_t>(p.model.params().count());
      // Psi counts every parameter plus the alignment padding that lets units split evenly.
      EXPECT_GE(psi, count);
      EXPECT_LT(psi - count, params.units().size() * 64 * static_cast<std::size_t>(n) +
                                 p.model.params().specs().size() * 64);
      const std::size_t sharded = psi / static_cast<std::size_t>(n);
      const bool split = n > 1;
      EXPECT_EQ(p.plan.bytes(MemCategory::parameters), 4 * (split && zero >= 3 ? sharded : psi));
      EXPECT_EQ(p.plan.bytes(MemCategory::gradients), 4 * (split && zero >= 2 ? sharded : psi));
      EXPECT_EQ(p.plan.bytes(MemCategory::optimizer), 8 * (split && zero >= 1 ? sharded : psi));
      // Communication buffers: stage 2 a few gradient buckets, stage 3 also gathered layers.
      const std::size_t unit_bytes = 4 * static_cast<std::size_t>(params.largest_unit());
      std::size_t comm = 0;
      if (split && zero >= 2) comm += ParamStore::kGradSlots * unit_bytes;
      if (split && zero >= 3) comm += ParamStore::kValueSlots * unit_bytes;
      EXPECT_GE(p.plan.bytes(MemCategory::communication), comm);
      EXPECT_LT(p.plan.bytes(MemCategory::communication), comm + 2 * MemoryPlan::kAlignment);
    }
}

TEST(ZeroMemory, TheSummaryNamesCommunicationBuffers) {
  Planned p(ParamSharding{4, 0, 3});
  EXPECT_NE(p.plan.summary().find("communication"), std::string::npos);
}

TEST(ZeroShards, RanksOwnEveryElementOnce) {
  for (int n : {1, 2, 3, 4})
    for (ParamState state : {ParamState::value, ParamState::adam_m}) {
      SCOPED_TRACE(n);
      std::map<int, std::vector<int>> seen;  // param -> times each element is owned
      for (int rank = 0; rank < n; ++rank) {
        Planned p(ParamSharding{n, rank, 3});
        for (const ParamPiece& piece : p.model.params().owned(state)) {
          auto& counts = seen[piece.param];
          counts.resize(static_cast<std::size_t>(p.model.params().specs()[static_cast<std::size_t>(piece.param)].shape.numel()));
          EXPECT_EQ(piece.data.numel(), piece.end - piece.begin);
          for (std::int64_t i = piece.begin; i < piece.end; ++i) ++counts[static_cast<std::size_t>(i)];
        }
      }
      Planned one(ParamSharding{});
      ASSERT_EQ(seen.size(), one.model.params().specs().size());
      for (const auto& [param, counts] : seen)
        for (int c : counts) ASSERT_EQ(c, 1) << one.model.params().specs()[static_cast<std::size_t>(param)].name;
    }
}

TEST(ZeroShards, HeldStateIsWholeUntilItsStageShardsIt) {
  Planned stage1(ParamSharding{2, 1, 1});
  const ModelParams& p1 = stage1.model.params();
  std::int64_t values = 0, moments = 0;
  for (const ParamPiece& piece : p1.held(ParamState::value)) values += piece.end - piece.begin;
  for (const ParamPiece& piece : p1.held(ParamState::adam_m)) moments += piece.end - piece.begin;
  EXPECT_EQ(values, p1.count());
  EXPECT_LT(moments, p1.count());
  EXPECT_GT(moments, 0);
}

TEST(FlatRangeBoxes, SplitsAChunkIntoContiguousBoxes) {
  const std::vector<std::int64_t> shape{4, 10};
  EXPECT_EQ(flat_range_boxes(shape, 0, 40), (std::vector<Slice>{Slice{{0, 0}, {4, 10}}}));
  EXPECT_EQ(flat_range_boxes(shape, 13, 17), (std::vector<Slice>{Slice{{1, 3}, {2, 7}}}));
  EXPECT_EQ(flat_range_boxes(shape, 7, 33),
            (std::vector<Slice>{Slice{{0, 7}, {1, 10}}, Slice{{1, 0}, {3, 10}}, Slice{{3, 0}, {4, 3}}}));
  EXPECT_EQ(flat_range_boxes(shape, 10, 30), (std::vector<Slice>{Slice{{1, 0}, {3, 10}}}));
  EXPECT_TRUE(flat_range_boxes(shape, 5, 5).empty());
  EXPECT_EQ(flat_range_boxes({7}, 2, 5), (std::vector<Slice>{Slice{{2}, {5}}}));
}

}  // namespace
}  // namespace ustrain
