// JSON nested far deeper than any real file (200,000 levels) in what the data floor reads: a
// tokenizer.json, its tokenizer_config.json, a dataset manifest, a JSONL line. Each is refused
// naming the file and the nesting limit; such a tokenizer.json used to overflow the stack of the
// code that copies the parsed document (a crash of data convert and data inspect).
#include <gtest/gtest.h>

#include <string>

#include "data/inputs/document_sink.h"
#include "data/tokenizers/hf_tokenizer.h"
#include "data/shards/manifest.h"
#include "data/inputs/text_documents.h"
#include "tests/unit/data/test_support.h"

namespace ustrain {
namespace {

const std::string kDeep = std::string(200000, '[') + std::string(200000, ']');
const std::string kLimit = "nested more than 256 levels deep";

TEST(DeepJson, DeepTokenizerFilesAreRefusedNamingThem) {
  test::ScratchDir dir;
  test::write_file(dir / "tokenizer.json", R"({"model": {}, "normalizer": )" + kDeep + "}");
  test::expect_user_error([&] { HfTokenizer::from_file(dir / "tokenizer.json"); },
                          {dir / "tokenizer.json", kLimit});
  // tokenizer_config.json beside a usable tokenizer.json.
  test::write_file(dir / "good/tokenizer.json",
                   R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": [], "unk_token": "a"}})");
  test::write_file(dir / "good/tokenizer_config.json", R"({"eos_token": )" + kDeep + "}");
  test::expect_user_error([&] { HfTokenizer::from_file(dir / "good/tokenizer.json"); },
                          {dir / "good/tokenizer_config.json", kLimit});
}

TEST(DeepJson, ADeepDatasetManifestIsRefusedNamingIt) {
  test::ScratchDir dir;
  test::write_file(dir / "manifest.json", R"({"format_version": 1, "tokenizer": )" + kDeep + "}");
  test::expect_user_error([&] { read_manifest(dir / "manifest.json"); }, {dir / "manifest.json", kLimit});
}

class NoDocuments : public DocumentSink {
 public:
  void add_text(std::string, std::optional<Split>, DocumentOrigin) override {}
  void add_tokens(std::span<const std::int32_t>, bool, bool, std::optional<Split>) override {}
  void advance(std::int64_t) override {}
};

TEST(DeepJson, ADeepJsonlLineIsRefusedNamingFileAndLine) {
  test::ScratchDir dir;
  test::write_file(dir / "a.jsonl", "{\"text\": \"fine\"}\n{\"text\": \"x\", \"meta\": " + kDeep + "}\n");
  NoDocuments sink;
  test::expect_user_error(
      [&] { read_jsonl_files({{dir / "a.jsonl", test::read_file(dir / "a.jsonl").size(), false}}, "text",
                         std::int64_t{1} << 20, sink); },
      {dir / "a.jsonl:2", kLimit});
}

}  // namespace
}  // namespace ustrain
