// A backend that implements a mask's kind only refuses a window or document ids with an error
// naming the field, never ignoring them; the CPU and recording backends, which implement every
// field, refuse a mask that contradicts its block.
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/record/recording_backend.h"

namespace ustrain {
namespace {

// An internal error whose message holds `fragment`, from `action`.
template <class F>
void expect_refused(F action, const std::string& fragment) {
  try {
    action();
    ADD_FAILURE() << "not refused: " << fragment;
  } catch (const std::logic_error& e) {
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
  }
}

TEST(AttentionMask, TheKindsAreImplementedAndAWindowOrDocumentsAreNot) {
  EXPECT_NO_THROW(require_implemented_mask(AttentionMask::causal(), "op"));
  EXPECT_NO_THROW(require_implemented_mask(AttentionMask::none(), "op"));
  AttentionMask windowed = AttentionMask::causal();
  windowed.window = 4;
  expect_refused([&] { require_implemented_mask(windowed, "some_op"); }, "some_op: a sliding window");
  std::vector<std::int32_t> docs(4, 0);
  AttentionMask documents = AttentionMask::causal();
  documents.k_documents = Tensor(docs.data(), Shape{1, 4}, DType::i32);
  expect_refused([&] { require_implemented_mask(documents, "some_op"); }, "document ids");
}

TEST(AttentionMask, TheCpuAndRecordingBackendsRefuseAMaskThatContradictsItsBlock) {
  const int H = 2, Hkv = 1, Dh = 4, S = 4;
  std::vector<float> qkv(S * (H + 2 * Hkv) * Dh), kv(S * 2 * Hkv * Dh), out(S * H * Dh), lse(H * S);
  std::vector<float> dq(out.size()), dkv(kv.size()), dout(out.size());
  const Tensor qkv_t(qkv.data(), Shape{1, S, (H + 2 * Hkv) * Dh}), kv_t(kv.data(), Shape{1, S, 2 * Hkv * Dh});
  const Tensor out_t(out.data(), Shape{1, S, H * Dh}), lse_t(lse.data(), Shape{1, H, S});
  const Tensor dq_t(dq.data(), out_t.shape), dkv_t(dkv.data(), kv_t.shape), dout_t(dout.data(), out_t.shape);
  // A causal block ends its ranges together; a window's positions saying otherwise are refused.
  AttentionMask shifted = AttentionMask::causal();
  shifted.window = 2;
  shifted.q_first = 3;
  // Document ids must cover the block's absolute positions.
  std::vector<std::int32_t> docs(S, 0);
  AttentionMask short_docs = AttentionMask::causal();
  short_docs.q_first = short_docs.k_first = 1;
  short_docs.q_documents = short_docs.k_documents = Tensor(docs.data(), Shape{1, S}, DType::i32);
  CpuBackend cpu(1);
  RecordingBackend recording;
  for (Backend* be : std::vector<Backend*>{&cpu, &recording}) {
    expect_refused([&] { be->attention_block_forward(out_t, lse_t, qkv_t, {0, S}, kv_t, {0, S}, shifted, H, Hkv); },
                   "ends both ranges together");
    expect_refused([&] {
      be->attention_block_backward(dq_t, dkv_t, dout_t, qkv_t, {0, S}, kv_t, {0, S}, out_t, lse_t, shifted, H, Hkv);
    }, "ends both ranges together");
    expect_refused([&] { be->attention_block_forward(out_t, lse_t, qkv_t, {0, S}, kv_t, {0, S}, short_docs, H, Hkv); },
                   "do not cover positions 1 .. 4");
  }
}

}  // namespace
}  // namespace ustrain
