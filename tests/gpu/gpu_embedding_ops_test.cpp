// The CUDA embedding ops against the CPU reference: gathers, the backward's accumulation into
// fp32 and activation-dtype tables, and its bitwise determinism. Tolerances: gpu_test_support.h.
// (GpuActTest runs in every activation dtype: gpu_ops_test.cpp instantiates it.)
#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <set>
#include <vector>

#include "gpu_test_support.h"

namespace ustrain::gpu_test {
namespace {

// ---- embedding ----

struct EmbeddingCase {
  std::int64_t vocab, dim, ids;
};
// Far more ids than rows, so every row is hit many times; an odd width; a wide row.
const EmbeddingCase kEmbeddingCases[] = {{37, 48, 300}, {1000, 19, 64}, {5, 2048, 512}};

TEST_P(GpuActTest, EmbeddingForwardGathersExactRows) {
  for (const auto& c : kEmbeddingCases) {
    auto table = random_values(static_cast<std::size_t>(c.vocab * c.dim), 6, act());
    auto ids = random_ids(static_cast<std::size_t>(c.ids), static_cast<std::int32_t>(c.vocab), 7);
    std::vector<float> want(static_cast<std::size_t>(c.ids * c.dim));
    cpu().embedding_forward(host(want, {c.ids, c.dim}), host_ids(ids, {c.ids}), host(table, {c.vocab, c.dim}));
    auto dtable = on_device(gpu(), table, {c.vocab, c.dim}, act());
    auto dids = ids_on_device(gpu(), ids);
    DeviceTensor out(gpu(), {c.ids, c.dim}, act());
    gpu().embedding_forward(out, *dids, *dtable);
    EXPECT_TRUE(same_bits(out.download(), want)) << "a gather copies rows exactly; V=" << c.vocab << " D=" << c.dim;
  }
}

TEST_P(GpuActTest, EmbeddingBackwardAccumulatesIntoFp32Table) {
  for (const auto& c : kEmbeddingCases) {
    auto ids = random_ids(static_cast<std::size_t>(c.ids), static_cast<std::int32_t>(c.vocab), 8);
    ids[0] = ids[1] = ids[2] = 0;  // at least one id repeated back to back
    auto dout = random_values(static_cast<std::size_t>(c.ids * c.dim), 9, act());
    const auto prefill = random_values(static_cast<std::size_t>(c.vocab * c.dim), 10, DType::f32);
    auto want = prefill;
    cpu().embedding_backward(host(want, {c.vocab, c.dim}), host_ids(ids, {c.ids}), host(dout, {c.ids, c.dim}));
    auto dtable = on_device(gpu(), prefill, {c.vocab, c.dim}, DType::f32);
    auto dids = ids_on_device(gpu(), ids);
    auto ddout = on_device(gpu(), dout, {c.ids, c.dim}, act());
    gpu().embedding_backward(*dtable, *dids, *ddout);
    const auto got = dtable->download();
    const std::string what = "embedding dtable V=" + std::to_string(c.vocab) + " D=" + std::to_string(c.dim);
    expect_close(got, want, fp32_tolerance(Measure::norm_rel), what);
    // Rows no id points at keep their previous gradient bit for bit.
    const std::set<std::int32_t> used(ids.begin(), ids.end());
    for (std::int64_t r = 0; r < c.vocab; ++r) {
      if (used.count(static_cast<std::int32_t>(r))) continue;
      const auto row = static_cast<std::size_t>(r * c.dim);
      EXPECT_EQ(std::memcmp(got.data() + row, prefill.data() + row, static_cast<std::size_t>(c.dim) * 4), 0)
          << what << ": untouched row " << r << " changed";
    }
  }
}

// A mixture of experts scatters rows into buffers of the activation dtype: each cell is its
// old value plus its rows summed in fp32 (the CPU's order), rounded once.
TEST_P(GpuActTest, EmbeddingBackwardIntoActivationTableRoundsOnce) {
  for (const auto& c : kEmbeddingCases) {
    auto ids = random_ids(static_cast<std::size_t>(c.ids), static_cast<std::int32_t>(c.vocab), 14);
    auto dout = random_values(static_cast<std::size_t>(c.ids * c.dim), 15, act());
    const auto prefill = random_values(static_cast<std::size_t>(c.vocab * c.dim), 16, act());
    auto want = prefill;
    cpu().embedding_backward(host(want, {c.vocab, c.dim}), host_ids(ids, {c.ids}), host(dout, {c.ids, c.dim}));
    auto dtable = on_device(gpu(), prefill, {c.vocab, c.dim}, act());
    auto dids = ids_on_device(gpu(), ids);
    auto ddout = on_device(gpu(), dout, {c.ids, c.dim}, act());
    gpu().embedding_backward(*dtable, *dids, *ddout);
    EXPECT_TRUE(same_bits(dtable->download(), rounded(want, act())))
        << "embedding backward into a " << dtype_name(act()) << " table V=" << c.vocab << " D=" << c.dim;
  }
}

TEST_P(GpuActTest, EmbeddingBackwardIsBitwiseDeterministic) {
  const std::int64_t vocab = 7, dim = 64, n = 4096;  // about 600 rows summed into each table row
  const auto ids = random_ids(static_cast<std::size_t>(n), static_cast<std::int32_t>(vocab), 11);
  const auto dout = random_values(static_cast<std::size_t>(n * dim), 12, act());
  const auto prefill = random_values(static_cast<std::size_t>(vocab * dim), 13, DType::f32);
  auto dids = ids_on_device(gpu(), ids);
  auto ddout = on_device(gpu(), dout, {n, dim}, act());
  std::vector<std::vector<float>> runs;
  for (int run = 0; run < 2; ++run) {
    auto dtable = on_device(gpu(), prefill, {vocab, dim}, DType::f32);
    gpu().embedding_backward(*dtable, *dids, *ddout);
    runs.push_back(dtable->download());
  }
  EXPECT_TRUE(same_bits(runs[0], runs[1])) << "two identical embedding backward calls gave different bits";
}

}  // namespace
}  // namespace ustrain::gpu_test
