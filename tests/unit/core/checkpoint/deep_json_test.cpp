// JSON nested far deeper than any real file (200,000 levels) in what the core floor reads: a
// config.json, a safetensors header and index, a checkpoint manifest and rank-file record, a
// calibration file, an evaluation task file. Each is refused naming the file and the nesting limit; several used to
// overflow the stack of the code that copies or prints the parsed document. The files ustrain
// keeps for itself (the kept peak, metrics lines, trace parts) treat such a document as
// unreadable, as they treat one that does not parse.
#include <gtest/gtest.h>

#include <string>

#include "core/checkpoint/format.h"
#include "core/train/resume.h"
#include "core/eval/task_file.h"
#include "core/interop/hf_llama.h"
#include "core/checkpoint/safetensors.h"
#include "core/plan/calibration.h"
#include "core/trace/chrome_trace.h"
#include "core/monitor/kept_peak.h"
#include "data/tokenizers/byte_tokenizer.h"
#include "tests/unit/data/test_support.h"
#include "tests/unit/support/user_error_support.h"

namespace ustrain {
namespace {

const std::string kDeep = std::string(200000, '[') + std::string(200000, ']');
const std::string kLimit = "nested more than 256 levels deep";

TEST(DeepJson, HuggingFaceFilesAreRefusedNamingThem) {
  const std::string config =
      R"({"model_type": "mixtral", "num_local_experts": 2, "num_experts_per_tok": 1, "sliding_window": )" + kDeep + "}";
  expect_error_mentions([&] { read_hf_config(config, "m/config.json"); }, {"m/config.json", kLimit});
  expect_error_mentions([&] { token_ids_from_llama_config(config, "m/config.json"); }, {"m/config.json", kLimit});
  expect_error_mentions([&] { decode_safetensors_header(R"({"a": )" + kDeep + "}", "m/model.safetensors"); },
                        {"m/model.safetensors", kLimit});
  test::ScratchDir dir;
  test::write_file(dir / "model.safetensors.index.json", R"({"weight_map": )" + kDeep + "}");
  expect_error_mentions([&] { locate_hf_model(dir.path().string()); }, {dir / "model.safetensors.index.json", kLimit});
}

TEST(DeepJson, CheckpointFilesAreRefusedNamingThem) {
  expect_error_mentions(
      [&] { manifest_from_json(R"({"format": "ustrain-checkpoint", "format_version": )" + kDeep + "}", "c/manifest.json"); },
      {"c/manifest.json", kLimit});
  expect_error_mentions([&] { file_record_from_json(R"({"rank": )" + kDeep + "}", "c/rank-00000.json"); },
                        {"c/rank-00000.json", kLimit});
}

TEST(DeepJson, ACalibrationFileIsRefusedNamingIt) {
  test::ScratchDir dir;
  test::write_file(dir / "calibration.json", R"({"gemm": )" + kDeep + "}");
  expect_error_mentions([&] { read_calibration(dir / "calibration.json"); }, {dir / "calibration.json", kLimit});
}

TEST(DeepJson, AnEvaluationTaskLineIsRefusedNamingTheFileAndLine) {
  test::ScratchDir dir;
  test::write_file(dir / "task.jsonl", "{\"context\": \"a\", \"choices\": [\"b\"], \"answer\": 0}\n"
                                       "{\"context\": " + kDeep + "}\n");
  const ByteTokenizer tokenizer;
  expect_error_mentions([&] { load_task(dir / "task.jsonl", tokenizer, 16); }, {dir / "task.jsonl line 2", kLimit});
}

TEST(DeepJson, FilesUstrainKeepsForItselfTreatADeepDocumentAsUnreadable) {
  test::ScratchDir dir;
  // The kept peak is rebuilt: the deep entry goes, the new one is kept.
  test::write_file(dir / "peak.json", R"({"other CPU": )" + kDeep + "}");
  EXPECT_EQ(keep_peak(dir / "peak.json", "this CPU", {1e12, "2026-11-25T21:10:00Z"}), "");
  ASSERT_TRUE(read_kept_peak(dir / "peak.json", "this CPU").has_value());
  EXPECT_EQ(test::read_file(dir / "peak.json").find("other CPU"), std::string::npos);
  // A deep metrics line is dropped like a torn one.
  test::write_file(dir / "metrics.jsonl", "{\"step\": 1}\n{\"step\": 2, \"x\": " + kDeep + "}\n");
  drop_metrics_after(dir / "metrics.jsonl", 5);
  EXPECT_EQ(test::read_file(dir / "metrics.jsonl"), "{\"step\": 1}\n");
  // A trace part that deep is no trace part.
  expect_error_mentions([&] { merge_chrome_traces({R"({"traceEvents": [)" + kDeep + "]}"}); },
                        {"trace part 0 of 1 is not a Chrome trace"});
}

}  // namespace
}  // namespace ustrain
