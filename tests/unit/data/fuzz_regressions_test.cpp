// The inputs that once crashed the dataset_manifest and megatron_idx fuzz targets
// (fuzz/regressions/TARGET/), read as ustrain reads them: each either reads or is a UserError
// that names its file, never another exception. A JSON number beyond a double (1e999999) in a
// dataset manifest used to escape the JSON parser as an internal error; a Megatron index of
// zero sequences handed memcpy a null pointer (seen by UBSan in the fuzz build), and one whose
// sequence offset lies near 2^63 overflowed the end printed in its error message; a
// tokenizer.json's token id near 2^31 sized the id tables at tens of gigabytes, and an added
// token's id beyond int32 wrapped to a negative index.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <sstream>
#include <span>
#include <string>
#include <vector>

#include "data/inputs/document_sink.h"
#include "data/tokenizers/hf_tokenizer.h"
#include "data/shards/manifest.h"
#include "data/inputs/megatron_format.h"
#include "tests/unit/data/test_support.h"

namespace ustrain {
namespace {

namespace fs = std::filesystem;

// The kept inputs of one target, sorted.
std::vector<fs::path> regressions(const std::string& target) {
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(fs::path(USTRAIN_SOURCE_DIR) / "fuzz/regressions" / target))
    files.push_back(entry.path());
  std::sort(files.begin(), files.end());
  return files;
}

// `read` either succeeds or throws a UserError naming `file`.
void reads_or_names(const std::string& file, const std::function<void()>& read) {
  try {
    read();
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find(file), std::string::npos) << e.what();
  }
}

// Counts what a reader hands on.
struct CountingSink final : DocumentSink {
  void add_text(std::string, std::optional<Split>, DocumentOrigin) override { ++documents; }
  void add_tokens(std::span<const std::int32_t>, bool, bool, std::optional<Split>) override { ++documents; }
  void advance(std::int64_t) override {}
  int documents = 0;
};

TEST(FuzzRegressions, DatasetManifests) {
  for (const fs::path& input : regressions("dataset_manifest"))
    reads_or_names(input.string(), [&] { read_manifest(input.string()); });
  const fs::path overflow = fs::path(USTRAIN_SOURCE_DIR) / "fuzz/regressions/dataset_manifest/number-beyond-double.json";
  test::expect_user_error([&] { read_manifest(overflow.string()); }, {overflow.string(), "not valid JSON"});
}

// Each index beside an empty .bin: an index of no sequences holds no documents.
TEST(FuzzRegressions, MegatronIndexes) {
  test::ScratchDir scratch;
  const fs::path dir = scratch.path();
  for (const fs::path& input : regressions("megatron_idx")) {
    fs::copy_file(input, dir / "data.idx", fs::copy_options::overwrite_existing);
    std::ofstream(dir / "data.bin").close();
    CountingSink sink;
    reads_or_names((dir / "data").string(), [&] { read_megatron({(dir / "data").string()}, 50304, sink); });
    if (input.filename() == "zero-sequences.idx") {
      EXPECT_NO_THROW(read_megatron({(dir / "data").string()}, 50304, sink));
      EXPECT_EQ(sink.documents, 0);
    }
    // Beside the fuzz target's .bin of 4 KiB, one of its sequences lies near 2^63, where the
    // message gave the sequence's end as offset + bytes, past int64.
    if (input.filename() == "offset-near-int64-max.idx") {
      test::write_file(dir / "data.bin", std::string(4096, '\1'));
      test::expect_user_error([&] { read_megatron({(dir / "data").string()}, 50304, sink); },
                              {"at offset 9223372036854775802, beyond the 4096 bytes of"});
    }
  }
}

TEST(FuzzRegressions, TokenizerJsonIds) {
  for (const fs::path& input : regressions("tokenizer_json")) {
    std::ifstream in(input, std::ios::binary);
    std::ostringstream text;
    text << in.rdbuf();
    test::expect_user_error([&] { HfTokenizer(text.str(), input.string()); }, {input.string(), "below 2^24"});
  }
}

}  // namespace
}  // namespace ustrain
