// The pieces before BPE: the pre-tokenizer regexes of GPT-2, cl100k and o200k, Split's
// behaviours, UTF-8 repair and the byte-level alphabet, each with its expected pieces.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "data/tokenizers/byte_level.h"
#include "data/tokenizers/pretokenizer.h"
#include "data/tokenizers/regex_splitter.h"
#include "data/tokenizers/tiktoken_file.h"
#include "data/tokenizers/utf8.h"
#include "tests/unit/data/test_support.h"

namespace ustrain {
namespace {

std::vector<std::string> split(const std::string& pattern, const std::string& text) {
  const RegexSplitter regex(pattern, "test");
  std::vector<std::string_view> views;
  RegexBudget budget(text.size());
  regex.split(text, views, budget);
  return {views.begin(), views.end()};
}

TEST(PreTokenizerRegex, Gpt2SplitsContractionsLettersNumbersAndSpaceRuns) {
  using V = std::vector<std::string>;
  EXPECT_EQ(split(kGpt2Pattern, "I'm 42 cats!!  \n"), (V{"I", "'m", " 42", " cats", "!!", "  \n"}));
  // \s+(?!\S) leaves the last space of a run to the word after it.
  EXPECT_EQ(split(kGpt2Pattern, "a  b"), (V{"a", " ", " b"}));
  // \p{L} covers every script; \p{N} other digits.
  EXPECT_EQ(split(kGpt2Pattern, "日本 \xD9\xA3\xD9\xA4"), (V{"日本", " \xD9\xA3\xD9\xA4"}));
}

TEST(PreTokenizerRegex, Cl100kCaseInsensitiveContractionsAndThreeDigitNumbers) {
  using V = std::vector<std::string>;
  EXPECT_EQ(split(known_tiktoken_pattern("cl100k_base"), "I'M 12345 日本語 x\n\n  y"),
            (V{"I", "'M", " ", "123", "45", " 日本語", " x", "\n\n", " ", " y"}));
}

TEST(PreTokenizerRegex, O200kSplitsCamelCaseAndKeepsSlashesWithPunctuation) {
  using V = std::vector<std::string>;
  EXPECT_EQ(split(known_tiktoken_pattern("o200k"), "HelloWorld's CamelCase 12345/path\n"),
            (V{"Hello", "World's", " Camel", "Case", " ", "123", "45", "/path", "\n"}));
}

// The pieces a Split step on " " makes of "a b  c" (stretches a, ' ', b, ' ', ' ', c).
std::vector<std::string> split_step(PreTokenizerStep::Behavior behavior, bool invert = false) {
  PreTokenizerStep step(PreTokenizerStep::Kind::split);
  step.regex = std::make_shared<const RegexSplitter>(" ", "test");
  step.behavior = behavior;
  step.invert = invert;
  const PreTokenizer pre_tokenizer({step});
  std::vector<Piece> pieces{{"a b  c", true}};
  std::deque<std::string> arena;
  RegexBudget budget(pieces[0].text.size());
  pre_tokenizer.run(pieces, arena, budget);
  std::vector<std::string> out;
  for (const Piece& p : pieces) out.emplace_back(p.text);
  return out;
}

TEST(PreTokenizerSplit, BehavioursAsTheLibraryFoldsThem) {
  using V = std::vector<std::string>;
  using B = PreTokenizerStep::Behavior;
  EXPECT_EQ(split_step(B::isolated), (V{"a", " ", "b", " ", " ", "c"}));
  EXPECT_EQ(split_step(B::removed), (V{"a", "b", "c"}));
  // A match joins the piece before it unless that piece is a match too.
  EXPECT_EQ(split_step(B::merged_with_previous), (V{"a ", "b ", " ", "c"}));
  // A match joins the piece after it unless that piece is a match too.
  EXPECT_EQ(split_step(B::merged_with_next), (V{"a", " b", " ", " c"}));
  EXPECT_EQ(split_step(B::contiguous), (V{"a", " ", "b", "  ", "c"}));
  // invert: the letters are the delimiters.
  EXPECT_EQ(split_step(B::removed, true), (V{" ", " ", " "}));
  EXPECT_EQ(split_step(B::merged_with_previous, true), (V{"a", " b", " ", " c"}));
}

TEST(PreTokenizerRegex, InvalidRegexIsAUserError) {
  test::expect_user_error([] { RegexSplitter("(unclosed", "my.json: pre_tokenizer 'Split'"); },
                          {"my.json: pre_tokenizer 'Split'", "does not compile"});
}

TEST(Utf8, RepairReplacesEachMaximalInvalidSubsequence) {
  EXPECT_TRUE(is_valid_utf8("caf\xC3\xA9 \xF0\x9F\x98\x80"));
  EXPECT_FALSE(is_valid_utf8("\xC3"));
  EXPECT_FALSE(is_valid_utf8("\xED\xA0\x80"));  // a surrogate
  // As Python's decode(errors="replace"): F0 9F 98 (cut short) is one U+FFFD, FF another.
  EXPECT_EQ(repair_utf8("a\xF0\x9F\x98z\xFF"), "a\xEF\xBF\xBDz\xEF\xBF\xBD");
}

TEST(ByteLevel, AlphabetIsGpt2s) {
  const ByteLevelAlphabet alphabet;
  EXPECT_EQ(alphabet.character(' '), "\xC4\xA0");   // Ġ
  EXPECT_EQ(alphabet.character('\n'), "\xC4\x8A");  // Ċ
  EXPECT_EQ(alphabet.character('A'), "A");
  EXPECT_EQ(alphabet.character(0xAD), "\xC5\x83");  // the soft hyphen, the 68th unprintable byte
  for (int b = 0; b < 256; ++b) {
    const std::string bytes(1, static_cast<char>(b));
    EXPECT_EQ(alphabet.bytes_of(alphabet.characters_of(bytes)), bytes);
  }
  EXPECT_EQ(alphabet.bytes_of(" not byte-level"), std::nullopt);
}

}  // namespace
}  // namespace ustrain
