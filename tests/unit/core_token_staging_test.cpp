// The token ids of a step's micro-batches are staged in host memory from the backend's
// allocate_host_staging (page-locked on CUDA), once, and read back as the executor's views.
#include <gtest/gtest.h>

#include <cstdint>
#include <numeric>
#include <vector>

#include "core/train/token_staging.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/error.h"

namespace ustrain {
namespace {

class StagingBackend : public CpuBackend {
 public:
  StagingBackend() : CpuBackend(1) {}
  HostStaging allocate_host_staging(std::size_t bytes, const char* what) override {
    requests.push_back(bytes);
    last_what = what;
    return CpuBackend::allocate_host_staging(bytes, what);
  }
  std::vector<std::size_t> requests;
  std::string last_what;
};

TEST(TokenStaging, AllocatesOnceFromTheBackendAndKeepsEachMicroBatch) {
  StagingBackend backend;
  TokenStaging staging(backend, 3, 5, "test token ids");
  ASSERT_EQ(backend.requests, std::vector<std::size_t>{3 * 2 * 5 * sizeof(std::int32_t)});
  EXPECT_EQ(backend.last_what, "test token ids");
  for (std::size_t m = 0; m < 3; ++m) {
    std::vector<std::int32_t> ids(5), targets(5);
    std::iota(ids.begin(), ids.end(), static_cast<std::int32_t>(10 * m));
    std::iota(targets.begin(), targets.end(), static_cast<std::int32_t>(10 * m + 1));
    staging.put(m, {ids, targets});
  }
  const auto views = staging.tokens(3);
  ASSERT_EQ(views.size(), 3u);
  for (std::size_t m = 0; m < 3; ++m)
    for (int i = 0; i < 5; ++i) {
      EXPECT_EQ(views[m].ids[i], static_cast<std::int32_t>(10 * m) + i);
      EXPECT_EQ(views[m].targets[i], static_cast<std::int32_t>(10 * m + 1) + i);
    }
  EXPECT_EQ(staging.tokens(2).size(), 2u);
  EXPECT_EQ(backend.requests.size(), 1u);  // put() allocates nothing
}

// Document ids are of whole windows (kernels/token_batch.h): under context parallelism more
// than the tokens the rank holds. A batch without them (a task's rows) stages none.
TEST(TokenStaging, KeepsTheDocumentIdsOfWholeWindows) {
  StagingBackend backend;
  TokenStaging staging(backend, 2, 3, "test token ids", 6);
  ASSERT_EQ(backend.requests, std::vector<std::size_t>{2 * (2 * 3 + 6) * sizeof(std::int32_t)});
  const std::vector<std::int32_t> ids{1, 2, 3}, targets{2, 3, 4}, documents{0, 0, 1, 1, 1, 2};
  TokenBatch with(ids, targets);
  with.documents = documents;
  staging.put(0, with);
  staging.put(1, {ids, targets});
  const auto views = staging.tokens(2);
  EXPECT_EQ(std::vector<std::int32_t>(views[0].documents.begin(), views[0].documents.end()), documents);
  EXPECT_EQ(std::vector<std::int32_t>(views[0].ids.begin(), views[0].ids.end()), ids);
  EXPECT_TRUE(views[1].documents.empty());
  staging.put(0, {ids, targets});  // the place is reused: its view follows what was put last
  EXPECT_TRUE(staging.tokens(1)[0].documents.empty());
  with.documents = std::span<const std::int32_t>(documents).first(3);
  EXPECT_ANY_THROW(staging.put(0, with));
}

TEST(TokenStaging, AMicroBatchOfAnotherSizeOrBeyondItsPlacesIsAnInternalError) {
  StagingBackend backend;
  TokenStaging staging(backend, 1, 4, "test token ids");
  const std::vector<std::int32_t> four(4), three(3);
  EXPECT_ANY_THROW(staging.put(0, {three, three}));
  EXPECT_ANY_THROW(staging.put(1, {four, four}));
  EXPECT_ANY_THROW(staging.tokens(2));
}

}  // namespace
}  // namespace ustrain
