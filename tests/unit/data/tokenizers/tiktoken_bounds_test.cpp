// tiktoken rank files that would take unbounded time or memory to convert are refused with
// the file (and line) named: a token longer than the maximum, and ranks whose derived merges
// outgrow the file many times over. Real files stay far inside both bounds (the reference
// test converts gpt2, cl100k_base and o200k_base).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "data/tokenizers/tokenizer.h"
#include "tests/unit/data/test_support.h"
#include "tests/unit/data/tokenizers/tiktoken_writer.h"

namespace ustrain {
namespace {

TEST(DataTiktokenBounds, ATokenLongerThanTheMaximumIsRefusedNamingItsLine) {
  const test::ScratchDir scratch;
  test::write_file(scratch / "long.tiktoken", test::rank_file_text({"he", std::string(1025, 'x')}));
  test::expect_user_error([&] { open_tokenizer(scratch / "long.tiktoken", {"gpt2", {}}); },
                          {scratch / "long.tiktoken", "line 258", "1025 bytes long", "maximum of 1024"});
  test::write_file(scratch / "longest.tiktoken", test::rank_file_text({"he", std::string(1024, 'x')}));
  EXPECT_EQ(open_tokenizer(scratch / "longest.tiktoken", {"gpt2", {}})->vocab_size(), 50257);
}

// Runs of one byte, each shorter run a token: a run of n has n - 1 splits into two tokens, so
// the merges grow with the cube of the longest run while the file grows with its square.
TEST(DataTiktokenBounds, RanksWhoseMergesOutgrowTheFileAreRefused) {
  const test::ScratchDir scratch;
  std::vector<std::string> runs;
  for (std::size_t length = 2; length <= 300; ++length) runs.push_back(std::string(length, 'a'));
  test::write_file(scratch / "runs.tiktoken", test::rank_file_text(runs));
  test::expect_user_error([&] { open_tokenizer(scratch / "runs.tiktoken", {"gpt2", {}}); },
                          {scratch / "runs.tiktoken", "more than 8 times the file's size", "ranks look made up"});
  // Short runs of every byte stay within the bound and convert.
  runs.clear();
  for (int byte = 0; byte < 256; ++byte)
    for (std::size_t length = 2; length <= 8; ++length) runs.push_back(std::string(length, static_cast<char>(byte)));
  test::write_file(scratch / "short-runs.tiktoken", test::rank_file_text(runs));
  const auto tokenizer = open_tokenizer(scratch / "short-runs.tiktoken", {R"(\s+|\S+)", {}});
  EXPECT_EQ(tokenizer->vocab_size(), 256 + 256 * 7);
  EXPECT_EQ(tokenizer->encode("aaaaaaaa"), (std::vector<std::int32_t>{256 + 'a' * 7 + 6}));  // the run of 8 'a'
  EXPECT_EQ(tokenizer->decode(tokenizer->encode("aaaaaaaaa bb")), "aaaaaaaaa bb");
}

}  // namespace
}  // namespace ustrain
