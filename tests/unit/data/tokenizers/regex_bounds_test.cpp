// Pre-tokenizer regexes are searched within bounds: real patterns split texts far beyond
// PCRE2's default limits (millions of spaces), while patterns that backtrack without end or
// rescan the text at every position stop with one error that names the regex and, in a
// conversion, the file and the document.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <ctime>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "data/tokenizers/byte_level.h"
#include "data/convert/convert.h"
#include "data/tokenizers/regex_splitter.h"
#include "data/tokenizers/tiktoken_file.h"
#include "tests/unit/data/test_support.h"

namespace ustrain {
namespace {

using Json = nlohmann::json;

// A search of `text` as a document of its own.
std::vector<std::string_view> split(const RegexSplitter& regex, std::string_view text, RegexLimits limits = {}) {
  RegexBudget budget(text.size(), limits);
  std::vector<std::string_view> pieces;
  regex.split(text, pieces, budget);
  return pieces;
}

TEST(DataRegexBounds, RealPatternsSplitRunsOfMillionsOfOneCharacterClass) {
  const std::string spaces(10'000'000, ' '), letters(4'000'000, 'A');
  for (const char* encoding : {"gpt2", "cl100k_base", "o200k_base"}) {
    const RegexSplitter regex(known_tiktoken_pattern(encoding), encoding);
    // \s+(?!\S) takes the whole run: nothing follows it.
    EXPECT_EQ(split(regex, spaces), std::vector<std::string_view>{spaces}) << encoding;
    EXPECT_EQ(split(regex, letters), std::vector<std::string_view>{letters}) << encoding;
    const std::string before_word = spaces + "word";  // the run, less the space that goes with the word
    EXPECT_EQ(split(regex, before_word).front().size(), spaces.size() - 1) << encoding;
  }
}

TEST(DataRegexBounds, BacktrackingPastTheMatchLimitIsARegexLimitError) {
  const RegexSplitter regex("x|(a|a)*b", "tokenizer.json: pre_tokenizer");
  const std::string text = "x" + std::string(40, 'a') + "!b";
  try {
    split(regex, text);
    ADD_FAILURE() << "no RegexLimitError";
  } catch (const RegexLimitError& error) {
    const std::string message = error.what();
    for (const char* part : {"tokenizer.json: pre_tokenizer", "after 1 of its 43 bytes", "match limit", "x|(a|a)*b"})
      EXPECT_NE(message.find(part), std::string::npos) << message;
  }
}

// Each attempt scans the rest of the text; no PCRE2 limit counts that, the CPU time does.
TEST(DataRegexBounds, APatternThatRescansTheTextAtEveryPositionStopsAtItsCpuTime) {
  const RegexSplitter regex(R"((?=(\w+))\1\d)", "test");
  const RegexLimits limits{0.2, 0, 0.2};
  const auto started = std::chrono::steady_clock::now();
  test::expect_user_error([&] { split(regex, std::string(200'000, 'a'), limits); },
                          {"CPU time limit of 0.2 s"});
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count(), 5.0);
  // The bound is per document: another has its own.
  EXPECT_EQ(split(regex, "a1", limits).size(), 1u);
}

// Searches that each stay far within the limit stop together once the document's budget is
// spent: a quadratic pattern on many pieces takes no longer than on one.
TEST(DataRegexBounds, TheSearchesOfADocumentShareOneCpuBudget) {
  const RegexSplitter regex(R"((?=(\w+))\1\d)", "test");
  const std::string piece(3'000, 'a');
  const RegexLimits limits{0.2, 0, 0.2};
  const auto cpu_seconds = [] { return static_cast<double>(std::clock()) / CLOCKS_PER_SEC; };
  double one_search = 1;  // the fastest of a few, as the searches below take it
  for (int i = 0; i < 5; ++i) {
    const double started = cpu_seconds();
    EXPECT_EQ(split(regex, piece, limits).size(), 1u);
    one_search = std::min(one_search, cpu_seconds() - started);
  }
  ASSERT_LT(one_search, 0.05) << "one search is meant to be well within the budget";
  // Together about 2 s of searches: ten times the budget, which stops them at about a tenth.
  const int searches = static_cast<int>(2.0 / std::max(one_search, 1e-4));
  RegexBudget document(searches * piece.size(), limits);
  std::vector<std::string_view> pieces;
  int done = 0;
  test::expect_user_error(
      [&] {
        for (; done < searches; ++done) regex.split(piece, pieces, document);
      },
      {"the searches of the document took longer than its CPU time limit of 0.2 s"});
  EXPECT_LT(done, searches / 2);
}

// The budget grows with the document up to its cap.
TEST(DataRegexBounds, TheBudgetGrowsWithTheDocumentUpToItsCap) {
  EXPECT_EQ(RegexBudget(0).seconds(), 10);
  EXPECT_EQ(RegexBudget(std::size_t{10} << 20).seconds(), 30);
  EXPECT_EQ(RegexBudget(std::size_t{64} << 20).seconds(), 60);
  EXPECT_EQ(RegexBudget(std::size_t{1} << 20, {1, 2, 2.5}).seconds(), 2.5);
}

TEST(DataRegexBounds, TheCalloutDoesNotChangeWhatPatternsMatch) {
  // Leading (*VERB) options stay first; compile errors point into the pattern as written.
  const RegexSplitter verbs("(*UCP)(*LIMIT_MATCH=1000)\\w+", "test");
  EXPECT_EQ(split(verbs, "ab cd"), (std::vector<std::string_view>{"ab", " ", "cd"}));
  const RegexSplitter anchored("^a|b", "test");
  EXPECT_EQ(split(anchored, "aab"), (std::vector<std::string_view>{"a", "a", "b"}));
  test::expect_user_error([] { RegexSplitter("ab(c", "test"); }, {"ab(c", "at offset 4"});
}

// A byte-level tokenizer.json (ids 0-255, no merges) whose pre-tokenizer splits by `pattern`.
Json split_tokenizer(const std::string& pattern) {
  const ByteLevelAlphabet alphabet;
  Json vocab = Json::object();
  for (int b = 0; b < 256; ++b) vocab[alphabet.character(static_cast<unsigned char>(b))] = b;
  Json j;
  j["added_tokens"] = Json::array({{{"id", 256}, {"content", "<|endoftext|>"}, {"single_word", false},
                                    {"lstrip", false}, {"rstrip", false}, {"normalized", false}, {"special", true}}});
  j["normalizer"] = nullptr;
  j["pre_tokenizer"] = {{"type", "Sequence"},
                        {"pretokenizers",
                         {{{"type", "Split"}, {"pattern", {{"Regex", pattern}}}, {"behavior", "Isolated"}, {"invert", false}},
                          {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}}}}};
  j["decoder"] = {{"type", "ByteLevel"}};
  j["model"] = {{"type", "BPE"}, {"vocab", vocab}, {"merges", Json::array()}};
  return j;
}

TEST(DataRegexBounds, AConversionNamesTheFileAndTheDocumentTheRegexGaveUpOn) {
  test::ScratchDir scratch;
  test::write_file(scratch / "tok/tokenizer.json", split_tokenizer("x|(a|a)*b").dump());
  const std::string bad = std::string(40, 'a') + "!b";
  test::write_file(scratch / "corpus.txt", "fine\n\n\nfine too\nstill\n\n" + bad + "\n");
  test::write_file(scratch / "corpus.jsonl", "{\"text\": \"fine\"}\n\n{\"text\": \"" + bad + "\"}\n");
  for (const auto& [input, where] : {std::pair{"corpus.txt", ": document 3 (from line 7): "},
                                     std::pair{"corpus.jsonl", ":3: "}}) {
    for (int workers : {1, 3}) {
      ConvertOptions options;
      options.inputs = {scratch / input};
      options.output_dir = scratch / "out";
      options.tokenizer = scratch / "tok/tokenizer.json";
      options.workers = workers;
      test::expect_user_error([&] { convert_dataset(options); },
                              {scratch / input + where + "the pre-tokenizer regex of", "match limit"});
      EXPECT_FALSE(std::filesystem::exists(scratch / "out"));
    }
  }
}

}  // namespace
}  // namespace ustrain
