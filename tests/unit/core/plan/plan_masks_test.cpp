// The planner prices attention by the work its mask needs: a sliding window or documents
// shrink the recorded attention FLOPs (core/plan/mask_work.h) and the predicted step, while MFU
// keeps counting causal attention over the whole sequence. The documents' length comes from the
// user, or from the dataset's mean when it is there (core/plan/document_length.h).
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "core/plan/document_length.h"
#include "core/plan/mask_work.h"
#include "core/plan/plan_report.h"
#include "core/plan/planner.h"
#include "data/convert/convert.h"
#include "tests/unit/support/user_error_support.h"

namespace ustrain {
namespace fs = std::filesystem;
namespace {

constexpr std::int64_t kSeq = 8192;

Recipe long_recipe(const std::vector<std::string>& overrides = {}) {
  return parse_recipe(fmt::format(R"(
[model]
vocab_size = 1000
d_model = 128
n_layers = 2
n_heads = 2
n_kv_heads = 1
ffn_hidden = 256
max_seq_len = {0}
[data]
path = "unused"
tokenizer = "external"
[train]
micro_batch = 1
global_batch = 1
seq_len = {0}
eval_interval = 0
)",
                                  kSeq),
                      "long.toml", overrides);
}

TEST(PlanMasks, RegularDocumentsNumberEachSequenceFromZero) {
  EXPECT_EQ(regular_documents(2, 5, 2), (std::vector<std::int32_t>{0, 0, 1, 1, 2, 0, 0, 1, 1, 2}));
  EXPECT_EQ(regular_documents(1, 3, 0), (std::vector<std::int32_t>{0, 0, 0}));
}

TEST(PlanMasks, DocumentLengthFromTheUserTheDatasetOrNone) {
  EXPECT_EQ(planned_documents(long_recipe(), 64).tokens, 0) << "no mask: nothing to price";
  EXPECT_TRUE(planned_documents(long_recipe(), 64).source.empty());
  const Recipe masked = long_recipe({"train.document_mask=true"});
  EXPECT_EQ(planned_documents(masked, 64).tokens, 64);
  const PlannedDocuments unknown = planned_documents(masked, 0);
  EXPECT_EQ(unknown.tokens, 0);
  expect_mentions(unknown.source, {"one document", "--document-tokens"});
  expect_mentions(user_error_of([&] { planned_documents(masked, -1); }), {"--document-tokens -1"});

  // A dataset of 200 documents of 31 or 32 tokens (30 or 31 bytes and the end-of-document token).
  const fs::path dir = fs::temp_directory_path() / ("ustrain_plan_masks_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  {
    std::ofstream text(dir / "corpus.txt");
    for (int i = 0; i < 200; ++i) text << fmt::format("document {:>3} of thirty bytes.\n\n", i);
  }
  ConvertOptions o;
  o.format = "text";
  o.inputs = {(dir / "corpus.txt").string()};
  o.output_dir = (dir / "data").string();
  o.val_fraction = 0;
  convert_dataset(o);
  const PlannedDocuments measured = planned_documents(long_recipe({"train.document_mask=true",
                                                                  "data.path=" + o.output_dir}), 0);
  fs::remove_all(dir);
  EXPECT_EQ(measured.tokens, 31);
  expect_mentions(measured.source, {"31 tokens", "the mean of the 200 training documents of data.path"});
}

TEST(PlanMasks, AWindowNeedsAboutTwoWOverSOfCausalAttention) {
  const double window = 512;
  const double f = mask_work(long_recipe({"model.sliding_window=512", "parallel.dp=1"}), 0).fraction();
  EXPECT_GT(f, 2 * window / kSeq) << "S W - W^2 / 2 pairs against S^2 / 2";
  EXPECT_LT(f, 2 * (window + 64) / kSeq) << "at most a query tile more keys per row";
}

TEST(PlanMasks, DocumentsNeedAboutTheirLengthOverSOfCausalAttention) {
  const Recipe masked = long_recipe({"train.document_mask=true", "parallel.dp=1"});
  const double length = 512, f = mask_work(masked, 512).fraction();
  EXPECT_GE(f, length / kSeq) << "S L / 2 pairs against S^2 / 2";
  EXPECT_LT(f, 1.2 * length / kSeq);
  // Documents of unknown length: one per sequence, causal but for the kernel's query tiles of 64.
  const double one = mask_work(masked, 0).fraction();
  EXPECT_GE(one, 1.0);
  EXPECT_LE(one, 1.0 + 64.0 / kSeq);
}

// The same plan with a window and with documents predicts shorter steps; MFU still counts the
// causal work of the whole sequence (6 L d S per token), so it grows by as much as the speed.
TEST(PlanMasks, PlannerPricesTheMaskAndKeepsTheMfuConvention) {
  PlanOptions o;
  o.devices = 1;
  o.gpu = "h100";
  const Plan causal = plan_layouts(long_recipe(), o);
  const Plan windowed = plan_layouts(long_recipe({"model.sliding_window=512"}), o);
  o.document_tokens = 256;
  const Plan documents = plan_layouts(long_recipe({"train.document_mask=true"}), o);
  for (const Plan* p : {&windowed, &documents}) {
    const PlannedLayout &masked = p->layouts.front(), &plain = causal.layouts.front();
    ASSERT_EQ(masked.layout.str(), plain.layout.str());
    EXPECT_LT(masked.time.compute_s, 0.8 * plain.time.compute_s);
    EXPECT_NEAR(masked.mfu / plain.mfu, plain.time.step_s / masked.time.step_s, 1e-9);
  }
  const std::string text = plan_text(windowed, {"long.toml", {}}, 1);
  expect_mentions(text, {"a sliding window of 512 tokens", "MFU counts causal attention over the whole sequence"});
  expect_mentions(plan_text(documents, {"long.toml", {}}, 1), {"documents of 256 tokens (--document-tokens)"});
  expect_mentions(plan_json(documents), {"\"document_tokens\": 256"});
  EXPECT_EQ(plan_text(causal, {"long.toml", {}}, 1).find("priced by the work"), std::string::npos);
}

}  // namespace
}  // namespace ustrain
