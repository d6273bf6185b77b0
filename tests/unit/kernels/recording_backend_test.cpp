// The recording backend: each op's FLOPs and bytes in the header's conventions, the summary
// per op class, and memory that is reserved, never committed, and faults when touched.
#include <gtest/gtest.h>

#include <vector>

#include "kernels/record/recording_backend.h"
#include "tests/unit/kernels/whole_attention.h"

namespace ustrain {
namespace {

TEST(RecordingBackend, CountsGemmFlopsAndBytes) {
  RecordingBackend be;
  const Tensor x(be.allocate(6 * 4 * 4), Shape{6, 4}), w(be.allocate(5 * 4 * 4), Shape{5, 4});
  const Tensor out(be.allocate(6 * 5 * 4), Shape{6, 5});
  be.linear_forward(out, x, w);               // (6, 5) = (6, 4) (5, 4)^T
  be.linear_backward(x, w, out, x, w);        // dx and dweight (+=)
  ASSERT_EQ(be.ops().size(), 3u);
  EXPECT_STREQ(be.ops()[0].name, "linear_forward");
  EXPECT_EQ(be.ops()[0].shapes, (std::vector<Shape>{Shape{6, 5}, Shape{6, 4}, Shape{5, 4}}));
  for (const RecordedOp& op : be.ops()) EXPECT_EQ(op.flops, 2 * 6 * 5 * 4) << op.name;
  EXPECT_EQ(be.ops()[0].bytes, (30 + 24 + 20) * 4);
  EXPECT_EQ(be.ops()[2].bytes, (20 + 20 + 30 + 24) * 4);  // dweight read and written
  const RecordSummary s = be.summary();
  EXPECT_EQ(s[OpClass::gemm].calls, 3);
  EXPECT_EQ(s[OpClass::gemm].flops, 3 * 240);
  EXPECT_EQ(s.total().flops, 3 * 240);
}

TEST(RecordingBackend, CountsCausalAttentionAsTheModelsFormulaDoes) {
  RecordingBackend be;
  const std::int64_t B = 2, S = 8, H = 4, Hkv = 2, Dh = 16;
  const Tensor qkv(be.allocate(B * S * (H + 2 * Hkv) * Dh * 4), Shape{B, S, (H + 2 * Hkv) * Dh});
  const Tensor out(be.allocate(B * S * H * Dh * 4), Shape{B, S, H * Dh});
  const Tensor lse(be.allocate(B * H * S * 4), Shape{B, H, S});
  test::whole_attention_forward(be, out, lse, qkv, H, Hkv);
  test::whole_attention_backward(be, qkv, out, qkv, out, lse, H, Hkv);
  // Q K^T and P V: B H S^2 Dh multiply-adds each, halved by the mask; backward twice that.
  EXPECT_EQ(be.ops()[0].flops, 2 * B * H * S * S * Dh);
  EXPECT_EQ(be.ops()[1].flops, 4 * B * H * S * S * Dh);
  EXPECT_EQ(be.summary()[OpClass::attention].calls, 2);
}

TEST(RecordingBackend, CountsAMaskedBlockByTheScoreEntriesTheCpuKernelComputes) {
  // A self block of 256 tokens in query tiles of 64: under a window of 64 a tile's keys are its
  // own 64 and the 63 before them (the first tile only its own); under documents of 64 tokens
  // (ids in the caller's host memory) its own 64.
  RecordingBackend be;
  const std::int64_t B = 2, S = 256, H = 4, Hkv = 2, Dh = 16;
  const Tensor qkv(be.allocate(B * S * (H + 2 * Hkv) * Dh * 4), Shape{B, S, (H + 2 * Hkv) * Dh});
  const Tensor out(be.allocate(B * S * H * Dh * 4), Shape{B, S, H * Dh});
  const Tensor lse(be.allocate(B * H * S * 4), Shape{B, H, S});
  AttentionMask windowed = AttentionMask::causal();
  windowed.window = 64;
  std::vector<std::int32_t> docs(static_cast<std::size_t>(B * S));
  for (std::size_t i = 0; i < docs.size(); ++i) docs[i] = static_cast<std::int32_t>(i % S / 64);
  AttentionMask documents = AttentionMask::causal();
  documents.q_documents = documents.k_documents = Tensor(docs.data(), Shape{B, S}, DType::i32);
  const SeqRange all{0, S};
  be.attention_block_forward(out, lse, qkv, all, Tensor(), all, windowed, H, Hkv);
  be.attention_block_backward(qkv, Tensor(), out, qkv, all, Tensor(), all, out, lse, windowed, H, Hkv);
  be.attention_block_forward(out, lse, qkv, all, Tensor(), all, documents, H, Hkv);
  const std::int64_t window_entries = B * (64 * 64 + 3 * 64 * 127), document_entries = B * 4 * 64 * 64;
  EXPECT_EQ(be.ops()[0].flops, 4 * H * Dh * window_entries);
  EXPECT_EQ(be.ops()[1].flops, 8 * H * Dh * window_entries);
  EXPECT_EQ(be.ops()[2].flops, 4 * H * Dh * document_entries);
}

// Document ids a model copies from its token batch into the backend's memory (what a planner's
// recorded step does) are priced as the ids copied, not as one document.
TEST(RecordingBackend, DocumentIdsCopiedFromTheHostArePriced) {
  RecordingBackend be(Device::cuda);
  const std::int64_t B = 1, S = 256, H = 4, Hkv = 2, Dh = 16;
  const Tensor qkv(be.allocate(B * S * (H + 2 * Hkv) * Dh * 4), Shape{B, S, (H + 2 * Hkv) * Dh}, DType::f32,
                   Device::cuda);
  const Tensor out(be.allocate(B * S * H * Dh * 4), Shape{B, S, H * Dh}, DType::f32, Device::cuda);
  const Tensor lse(be.allocate(B * H * S * 4), Shape{B, H, S}, DType::f32, Device::cuda);
  const Tensor ids(be.allocate(B * S * 4), Shape{B, S}, DType::i32, Device::cuda);
  std::vector<std::int32_t> docs(static_cast<std::size_t>(B * S));
  for (std::size_t i = 0; i < docs.size(); ++i) docs[i] = static_cast<std::int32_t>(i / 64);
  be.copy(ids, Tensor(docs.data(), Shape{B, S}, DType::i32));
  docs.assign(docs.size(), 0);  // what was copied counts, not the host buffer's later contents
  AttentionMask documents = AttentionMask::causal();
  documents.q_documents = documents.k_documents = ids;
  const SeqRange all{0, S};
  be.attention_block_forward(out, lse, qkv, all, Tensor(), all, documents, H, Hkv);
  EXPECT_EQ(be.ops().back().flops, 4 * H * Dh * B * 4 * 64 * 64);
}

TEST(RecordingBackend, ReservesWithoutCommittingAndHostResultsAreNothing) {
  RecordingBackend be;
  const std::size_t huge = std::size_t{1} << 40;  // 1 TiB of address space
  void* p = be.allocate(huge);
  EXPECT_EQ(be.reserved_bytes(), huge);
  const Tensor t(p, Shape{static_cast<std::int64_t>(huge / 4)});
  be.fill(t, 0.0f);
  EXPECT_EQ(be.sum_of_squares(t), 0.0);
  std::vector<float> host(4, 7.0f);
  be.copy(Tensor(host.data(), Shape{4}), t.slice(0, 4));
  EXPECT_EQ(host, std::vector<float>(4, 7.0f));
  EXPECT_EQ(be.summary()[OpClass::copy].calls, 2);
  EXPECT_EQ(be.summary()[OpClass::optimizer].calls, 1);
  be.clear();
  EXPECT_TRUE(be.ops().empty());
  be.release(p);
  EXPECT_EQ(be.reserved_bytes(), 0u);
  EXPECT_EQ(be.peak_device_bytes(), huge);
}

TEST(RecordingBackend, HostCopiesOfARoutersChoicesReadABalancedRouting) {
  RecordingBackend be;
  const std::int64_t n = 6, e = 4, k = 2;
  const auto planned = [&](Shape s, DType d) {
    return Tensor(be.allocate(static_cast<std::size_t>(s.numel()) * 4), s, d);
  };
  const Tensor experts = planned(Shape{n, k}, DType::i32), gates = planned(Shape{n, k}, DType::f32);
  const Tensor probs = planned(Shape{n, e}, DType::f32), lse = planned(Shape{n}, DType::f32);
  const Tensor logits = planned(Shape{n, e}, DType::f32);
  be.moe_route(experts, gates, probs, lse, logits, MoeRouting{static_cast<int>(k), false, true}, Tensor());
  std::vector<std::int32_t> chosen(static_cast<std::size_t>(n * k), -1);
  be.copy(Tensor(chosen.data(), experts.shape, DType::i32), experts);
  // Choice j of token t goes to expert (t k + j) mod E: each expert n k / E rows, a token's
  // choices distinct.
  EXPECT_EQ(chosen, (std::vector<std::int32_t>{0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3}));
  // Another i32 tensor read back stays as it was; a copy into reserved memory writes nothing.
  std::vector<std::int32_t> other(static_cast<std::size_t>(n * k), -1);
  be.copy(Tensor(other.data(), gates.shape, DType::i32), planned(Shape{n, k}, DType::i32));
  EXPECT_EQ(other, std::vector<std::int32_t>(other.size(), -1));
  be.copy(planned(Shape{n, k}, DType::i32), experts);  // would fault if it wrote
}

TEST(RecordingBackendDeathTest, MemoryTouchedBehindItsBackFaults) {
  RecordingBackend be;
  auto* p = static_cast<volatile float*>(be.allocate(4096));
  EXPECT_DEATH(p[0] = 1.0f, "");
}

}  // namespace
}  // namespace ustrain
