// tokenizer.json and tiktoken support on small files made here, each feature with ids worked
// out by hand (in the comments): byte-level and sentencepiece-style BPE, byte fallback,
// Metaspace's prepend schemes, NFC, added-token rules, the decoders, the refusals, tiktoken
// rank files, and datasets that carry a tokenizer.json.
// (pretokenizer_test.cpp checks the pieces before BPE; tokenizer_reference_test.cpp compares
// real files with reference encoders.)
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "data/tokenizers/byte_level.h"
#include "data/shards/dataset_tokenizer.h"
#include "data/convert/convert.h"
#include "data/shards/dataset.h"
#include "data/tokenizers/hf_tokenizer.h"
#include "data/tokenizers/pretokenizer.h"
#include "data/tokenizers/regex_splitter.h"
#include "data/tokenizers/tiktoken_file.h"
#include "data/tokenizers/tokenizer.h"
#include "data/tokenizers/utf8.h"
#include "tests/unit/data/test_support.h"
#include "tests/unit/data/tokenizers/tiktoken_writer.h"

namespace ustrain {
namespace {

using Json = nlohmann::json;
using Ids = std::vector<std::int32_t>;

// A byte-level tokenizer.json: ids 0-255 are the bytes, then "he" 256, "ll" 257, "hell" 258
// (merges he, ll, he+ll in that order) and "hello" 259, which no merge reaches.
Json byte_level_json() {
  const ByteLevelAlphabet alphabet;
  Json vocab = Json::object();
  for (int b = 0; b < 256; ++b) vocab[alphabet.character(static_cast<unsigned char>(b))] = b;
  vocab["he"] = 256;
  vocab["ll"] = 257;
  vocab["hell"] = 258;
  vocab["hello"] = 259;
  Json j;
  j["added_tokens"] = Json::array();
  j["normalizer"] = nullptr;
  j["pre_tokenizer"] = {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true}, {"use_regex", true}};
  j["post_processor"] = {{"type", "ByteLevel"}, {"trim_offsets", false}};
  j["decoder"] = {{"type", "ByteLevel"}};
  j["model"] = {{"type", "BPE"},      {"vocab", vocab},        {"merges", Json::array({"h e", "l l", "he ll"})},
                {"dropout", nullptr}, {"unk_token", nullptr},  {"byte_fallback", false}};
  return j;
}

Json added(const std::string& content, int id, bool special, const Json& flags = Json::object()) {
  Json t = {{"id", id},         {"content", content}, {"single_word", false}, {"lstrip", false},
            {"rstrip", false},  {"normalized", false}, {"special", special}};
  t.update(flags);
  return t;
}

TEST(HfTokenizer, ByteLevelBpeMergesByRank) {
  const HfTokenizer tokenizer(byte_level_json().dump(), "byte-level.json");
  // "hello": h e l l o -> he l l o (rank 0) -> he ll o (rank 1) -> hell o (rank 2).
  // " hello" is its own piece: the space stays a token, as no merge takes it.
  EXPECT_EQ(tokenizer.encode("hello hello"), (Ids{258, 'o', ' ', 258, 'o'}));
  EXPECT_EQ(tokenizer.decode(tokenizer.encode("hello hello")), "hello hello");
  EXPECT_EQ(tokenizer.vocab_size(), 260);
  EXPECT_EQ(tokenizer.eos_id(), -1);  // no end-of-text token among its added tokens
  // Bytes that are not UTF-8 are encoded as U+FFFD (EF BF BD).
  EXPECT_EQ(tokenizer.encode("\xFF"), (Ids{0xEF, 0xBF, 0xBD}));
  // A byte sequence that is no UTF-8 decodes to U+FFFD.
  EXPECT_EQ(tokenizer.decode(Ids{'a', 0xC3}), "a\xEF\xBF\xBD");
  EXPECT_EQ(tokenizer.piece(256), "he");
  EXPECT_EQ(tokenizer.piece(' '), "' '");
  EXPECT_EQ(tokenizer.piece('\n'), "<0x0A>");
}

TEST(HfTokenizer, IgnoreMergesTakesAWholeWordThatIsAToken) {
  Json j = byte_level_json();
  j["model"]["ignore_merges"] = true;
  const HfTokenizer tokenizer(j.dump(), "ignore-merges.json");
  // "hello" is token 259 as a whole; " hello" is not a token and goes through the merges.
  EXPECT_EQ(tokenizer.encode("hello hello"), (Ids{259, ' ', 258, 'o'}));
}

TEST(HfTokenizer, ByteLevelAddPrefixSpace) {
  Json j = byte_level_json();
  j["pre_tokenizer"]["add_prefix_space"] = true;
  const HfTokenizer tokenizer(j.dump(), "prefix.json");
  EXPECT_EQ(tokenizer.encode("hello"), (Ids{' ', 258, 'o'}));
  EXPECT_EQ(tokenizer.encode(" hello"), (Ids{' ', 258, 'o'}));  // already starts with a space
}

TEST(HfTokenizer, NfcWhereTheFileAsksForIt) {
  Json j = byte_level_json();
  const std::string decomposed = "e\xCC\x81";  // e + U+0301 COMBINING ACUTE ACCENT
  EXPECT_EQ(HfTokenizer(j.dump(), "plain.json").encode(decomposed), (Ids{'e', 0xCC, 0x81}));
  j["normalizer"] = {{"type", "Sequence"}, {"normalizers", Json::array({{{"type", "NFC"}}})}};
  // NFC composes it into U+00E9 (C3 A9).
  EXPECT_EQ(HfTokenizer(j.dump(), "nfc.json").encode(decomposed), (Ids{0xC3, 0xA9}));
  EXPECT_EQ(HfTokenizer(j.dump(), "nfc.json").encode("\xEA\xB0\x80"), (Ids{0xEA, 0xB0, 0x80}));  // 가 stays
  // Hangul jamo compose too: U+1100 U+1161 -> U+AC00.
  EXPECT_EQ(HfTokenizer(j.dump(), "nfc.json").encode("\xE1\x84\x80\xE1\x85\xA1"), (Ids{0xEA, 0xB0, 0x80}));
}

TEST(HfTokenizer, AddedTokensHonourLstripRstripSingleWord) {
  Json j = byte_level_json();
  j["added_tokens"] = Json::array({added("<m>", 300, true, {{"lstrip", true}}),
                                   added("say", 301, false, {{"single_word", true}}),
                                   added("</s>", 302, true, {{"rstrip", true}})});
  const HfTokenizer tokenizer(j.dump(), "added.json");
  // "a" | " <m>" (lstrip takes the space) | " essay " ("say" inside a word is not matched) |
  // "say" | " " | "</s>  " (rstrip takes the spaces) | "b". " essay " splits as " essay", " ".
  EXPECT_EQ(tokenizer.encode("a <m> essay say </s>  b"),
            (Ids{'a', 300, ' ', 'e', 's', 's', 'a', 'y', ' ', 301, ' ', 302, 'b'}));
  // Decoding leaves the special tokens out and keeps "say".
  EXPECT_EQ(tokenizer.decode(tokenizer.encode("a <m> essay say </s>  b")), "a essay say b");
  EXPECT_EQ(tokenizer.eos_id(), 302);  // </s>, a conventional end-of-text name
  EXPECT_EQ(tokenizer.vocab_size(), 303);
  EXPECT_EQ(tokenizer.piece(300), "<m>");
}

TEST(HfTokenizer, TheLongestAddedTokenWinsAtAPosition) {
  Json j = byte_level_json();
  j["added_tokens"] = Json::array({added("<|a", 300, true), added("<|a|>", 301, true)});
  EXPECT_EQ(HfTokenizer(j.dump(), "longest.json").encode("x<|a|><|ab"), (Ids{'x', 301, 300, 'b'}));
}

// A sentencepiece-style file (Llama 2): <unk> 0, <s> 1, </s> 2, bytes <0x00>.. as 3..258,
// then "▁" 259, "a" 260, "b" 261, "▁a" 262, "ab" 263, "▁ab" 264; merges ▁+a, a+b, ▁a+b.
Json sentencepiece_json() {
  Json vocab = {{"<unk>", 0}, {"<s>", 1}, {"</s>", 2}};
  for (int b = 0; b < 256; ++b) vocab[fmt::format("<0x{:02X}>", b)] = 3 + b;
  vocab["\xE2\x96\x81"] = 259;
  vocab["a"] = 260;
  vocab["b"] = 261;
  vocab["\xE2\x96\x81" "a"] = 262;
  vocab["ab"] = 263;
  vocab["\xE2\x96\x81" "ab"] = 264;
  Json j;
  j["added_tokens"] = Json::array({added("<unk>", 0, true), added("<s>", 1, true), added("</s>", 2, true)});
  j["normalizer"] = {{"type", "Sequence"},
                     {"normalizers", Json::array({{{"type", "Prepend"}, {"prepend", "\xE2\x96\x81"}},
                                                  {{"type", "Replace"}, {"pattern", {{"String", " "}}},
                                                   {"content", "\xE2\x96\x81"}}})}};
  j["pre_tokenizer"] = nullptr;
  j["post_processor"] = {{"type", "TemplateProcessing"}};
  j["decoder"] = {{"type", "Sequence"},
                  {"decoders", Json::array({{{"type", "Replace"}, {"pattern", {{"String", "\xE2\x96\x81"}}}, {"content", " "}},
                                            {{"type", "ByteFallback"}},
                                            {{"type", "Fuse"}},
                                            {{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}}})}};
  j["model"] = {{"type", "BPE"},
                {"vocab", vocab},
                {"merges", Json::array({Json::array({"\xE2\x96\x81", "a"}), Json::array({"a", "b"}),
                                        Json::array({"\xE2\x96\x81" "a", "b"})})},
                {"unk_token", "<unk>"},
                {"fuse_unk", true},
                {"byte_fallback", true}};
  return j;
}

TEST(HfTokenizer, SentencepieceStyleBpeWithByteFallback) {
  const HfTokenizer tokenizer(sentencepiece_json().dump(), "sp.json");
  // "ab é" -> "▁ab▁é": ▁ a b ▁ <0xC3> <0xA9> -> ▁a b ... -> ▁ab; é has no piece: its bytes.
  const Ids ids = tokenizer.encode("ab \xC3\xA9");
  EXPECT_EQ(ids, (Ids{264, 259, 3 + 0xC3, 3 + 0xA9}));
  // Replace ▁ -> " ", the bytes back into é, fused, the one leading space stripped.
  EXPECT_EQ(tokenizer.decode(ids), "ab \xC3\xA9");
  EXPECT_EQ(tokenizer.eos_id(), 2);
  // Special tokens are split out before the normalizer, which then prepends ▁ to each piece.
  EXPECT_EQ(tokenizer.encode("a</s>b"), (Ids{262, 2, 259, 261}));
  // A lone byte that is no UTF-8 decodes to one U+FFFD per byte.
  EXPECT_EQ(tokenizer.decode(Ids{260, 3 + 0xC3}), "a\xEF\xBF\xBD");
}

TEST(HfTokenizer, NormalizedAddedTokensAreMatchedAsTheNormalizerWritesThem) {
  Json j = sentencepiece_json();
  j["added_tokens"].push_back(added("b a", 265, false, {{"normalized", true}}));
  // The content "b a" becomes "▁b▁a" (Prepend, Replace); the text "ab a" becomes "▁ab▁a",
  // where it is not found, and "a b a" becomes "▁a▁b▁a": "▁a", then the token.
  const HfTokenizer tokenizer(j.dump(), "normalized.json");
  EXPECT_EQ(tokenizer.encode("a b a"), (Ids{262, 265}));
  EXPECT_EQ(tokenizer.encode("b a"), (Ids{265}));
  EXPECT_EQ(tokenizer.encode("ab a"), (Ids{264, 262}));
}

TEST(HfTokenizer, UnknownCharactersFuseIntoOneUnkWithoutByteFallback) {
  Json j = sentencepiece_json();
  j["model"]["byte_fallback"] = false;
  EXPECT_EQ(HfTokenizer(j.dump(), "unk.json").encode("\xC3\xA9\xC3\xA9 a"), (Ids{259, 0, 262}));
  j["model"]["unk_token"] = nullptr;
  test::expect_user_error([&] { HfTokenizer(j.dump(), "nounk.json").encode("\xC3\xA9"); },
                          {"nounk.json", "has no token", "unk_token"});
}

TEST(HfTokenizer, MetaspacePrependSchemes) {
  Json j = sentencepiece_json();
  j["normalizer"] = nullptr;
  j["decoder"] = {{"type", "Metaspace"}, {"replacement", "\xE2\x96\x81"}, {"prepend_scheme", "always"}};
  const auto encode = [&](const std::string& scheme, const std::string& text) {
    j["pre_tokenizer"] = {{"type", "Metaspace"}, {"replacement", "\xE2\x96\x81"}, {"prepend_scheme", scheme}, {"split", true}};
    return HfTokenizer(j.dump(), "metaspace.json").encode(text);
  };
  // "a</s>a": the piece after the special token gets ▁ under "always" only.
  EXPECT_EQ(encode("always", "a</s>a"), (Ids{262, 2, 262}));
  EXPECT_EQ(encode("first", "a</s>a"), (Ids{262, 2, 260}));
  EXPECT_EQ(encode("never", "a</s>a"), (Ids{260, 2, 260}));
  // split: a piece begins at each ▁, so "ab ab" is ▁ab, ▁ab (not ▁ab▁ + ab).
  EXPECT_EQ(encode("first", "ab ab"), (Ids{264, 264}));
  EXPECT_EQ(encode("never", "ab ab"), (Ids{263, 264}));  // "ab", "▁ab"
  // Each U+2581 of a run is a piece of its own (the library's metaspace.rs "multiple_spaces").
  EXPECT_EQ(encode("always", "ab   ab"), (Ids{264, 259, 259, 264}));
  // The Metaspace decoder drops the ▁ of the first token and turns the others into spaces.
  const HfTokenizer tokenizer(j.dump(), "metaspace.json");
  EXPECT_EQ(tokenizer.decode(Ids{264, 264}), "ab ab");
}

TEST(HfTokenizer, RefusesWhatItDoesNotImplementNamingIt) {
  const auto refused = [](const std::function<void(Json&)>& edit, const std::vector<std::string>& fragments) {
    Json j = byte_level_json();
    edit(j);
    std::vector<std::string> all = fragments;
    all.push_back("x.json");
    test::expect_user_error([&] { HfTokenizer(j.dump(), "x.json"); }, all);
  };
  refused([](Json& j) { j["normalizer"] = {{"type", "NFKC"}}; }, {"normalizer", "'NFKC'", "not supported"});
  refused([](Json& j) { j["normalizer"] = {{"type", "Sequence"}, {"normalizers", Json::array({{{"type", "Lowercase"}}})}}; },
          {"'Lowercase'", "not supported"});
  refused([](Json& j) { j["normalizer"] = {{"type", "Replace"}, {"pattern", {{"Regex", " +"}}}, {"content", " "}}; },
          {"normalizer 'Replace'", "Regex pattern"});
  refused([](Json& j) { j["pre_tokenizer"] = {{"type", "Whitespace"}}; }, {"pre_tokenizer", "'Whitespace'"});
  refused([](Json& j) { j["pre_tokenizer"] = {{"type", "Digits"}, {"individual_digits", true}}; }, {"'Digits'"});
  refused([](Json& j) {
            j["pre_tokenizer"] = {{"type", "Split"}, {"pattern", {{"Regex", "\\s"}}}, {"behavior", "Sideways"}, {"invert", false}};
          },
          {"pre_tokenizer 'Split'", "behavior 'Sideways'"});
  refused([](Json& j) {
            j["pre_tokenizer"] = {{"type", "Sequence"},
                                  {"pretokenizers", Json::array({{{"type", "ByteLevel"}},
                                                                 {{"type", "Split"}, {"pattern", {{"String", " "}}},
                                                                  {"behavior", "Isolated"}}})}};
          },
          {"after ByteLevel"});
  refused([](Json& j) { j["model"]["type"] = "WordPiece"; }, {"model", "'WordPiece'", "implements BPE"});
  refused([](Json& j) { j["model"]["type"] = "Unigram"; }, {"'Unigram'"});
  refused([](Json& j) { j["model"]["dropout"] = 0.1; }, {"dropout"});
  refused([](Json& j) { j["model"]["continuing_subword_prefix"] = "##"; }, {"continuing_subword_prefix"});
  refused([](Json& j) { j["decoder"] = {{"type", "WordPiece"}}; }, {"decoder", "'WordPiece'"});
  refused([](Json& j) { j["decoder"] = {{"type", "CTC"}}; }, {"decoder", "'CTC'"});
  refused([](Json& j) { j["post_processor"] = {{"type", "BertProcessing"}}; }, {"post_processor", "'BertProcessing'"});
  refused([](Json& j) { j["truncation"] = {{"max_length", 512}}; }, {"truncation"});
  refused([](Json& j) { j["padding"] = {{"strategy", "BatchLongest"}}; }, {"padding"});
  refused([](Json& j) {
            j["pre_tokenizer"] = {{"type", "Metaspace"}, {"replacement", "_"}, {"prepend_scheme", "sometimes"}};
          },
          {"prepend_scheme 'sometimes'"});
  test::expect_user_error([] { HfTokenizer("{not json", "bad.json"); }, {"bad.json", "not valid JSON"});
  test::expect_user_error([] { HfTokenizer("{}", "empty.json"); }, {"empty.json", "no \"model\""});
  Json broken = byte_level_json();
  broken["model"]["merges"].push_back("x yz");
  test::expect_user_error([&] { HfTokenizer(broken.dump(), "broken.json"); }, {"broken.json", "merge 3", "missing"});
}

// Ranks 0-255 the bytes, then "he" 256, "ll" 257, "hell" 258.
std::string write_rank_file(const test::ScratchDir& scratch) {
  test::write_file(scratch / "tiny.tiktoken", test::rank_file_text({"he", "ll", "hell"}));
  return scratch / "tiny.tiktoken";
}

TEST(Tiktoken, RankFileWithAPatternAndSpecialTokens) {
  const test::ScratchDir scratch;
  const std::string file = write_rank_file(scratch);
  const auto tokenizer = open_tokenizer(file, {R"(\s+|\S+)", {"<|endoftext|>=259"}});
  // "hello": lowest rank first, as tiktoken: he (256), then ll (257), then hell (258).
  EXPECT_EQ(tokenizer->encode("hello hello<|endoftext|>"), (Ids{258, 'o', ' ', 258, 'o', 259}));
  EXPECT_EQ(tokenizer->eos_id(), 259);
  EXPECT_EQ(tokenizer->vocab_size(), 260);
  EXPECT_EQ(tokenizer->decode(Ids{258, 'o', 259}), "hello");
  EXPECT_EQ(tokenizer->identity(), "huggingface");
}

TEST(Tiktoken, BadFilesAndOptionsAreUserErrors) {
  const test::ScratchDir scratch;
  const std::string file = write_rank_file(scratch);
  test::expect_user_error([&] { open_tokenizer(file); }, {file, "--tiktoken-pattern"});
  test::expect_user_error([&] { open_tokenizer(file, {"cl100k_bas", {}}); }, {"cl100k_bas", "not a known encoding"});
  test::expect_user_error([&] { open_tokenizer(file, {"\\s+|\\S+", {"<|x|>=12"}}); }, {"<|x|>", "id 12", "rank"});
  test::expect_user_error([&] { open_tokenizer(file, {"\\s+|\\S+", {"nonsense"}}); }, {"nonsense", "TOKEN=ID"});
  test::expect_user_error([&] { open_tokenizer("byte", {"cl100k_base", {}}); }, {"apply to tiktoken"});
  test::write_file(scratch / "bad.tiktoken", "aGU= 0\n!!! 1\n");
  test::expect_user_error([&] { open_tokenizer(scratch / "bad.tiktoken", {"gpt2", {}}); }, {"bad.tiktoken line 2"});
}

TEST(HfTokenizer, DatasetsCarryTheirTokenizerJsonAndItsEos) {
  const test::ScratchDir scratch;
  Json j = byte_level_json();
  j["added_tokens"] = Json::array({added("<|endoftext|>", 260, true), added("<|eot|>", 261, true)});
  test::write_file(scratch / "tok/tokenizer.json", j.dump());
  // tokenizer_config.json names the EOS: <|eot|>, not the conventional <|endoftext|>.
  test::write_file(scratch / "tok/tokenizer_config.json", R"({"eos_token": {"content": "<|eot|>"}})");
  std::string corpus;
  for (int i = 0; i < 40; ++i) corpus += "hello document " + std::to_string(i) + " caf\xC3\xA9<|endoftext|>x\n\n";
  test::write_file(scratch / "corpus.txt", corpus);
  for (int workers : {1, 2}) {
    ConvertOptions options;
    options.inputs = {scratch / "corpus.txt"};
    options.output_dir = scratch / ("out-" + std::to_string(workers));
    options.tokenizer = scratch / "tok/tokenizer.json";
    options.workers = workers;
    options.val_fraction = 0;
    convert_dataset(options);
  }
  const TokenDataset dataset = TokenDataset::open(scratch / "out-1");
  EXPECT_EQ(dataset.tokenizer().kind, "huggingface");
  EXPECT_EQ(dataset.tokenizer().eos_id, 261);
  EXPECT_EQ(dataset.tokenizer().vocab_size, 262);
  EXPECT_EQ(dataset.tokenizer().model_file, "tokenizer.json");
  EXPECT_EQ(test::read_file(scratch / "out-1/tokenizer.json"), j.dump());
  EXPECT_EQ(test::read_file(scratch / "out-1/train-00000.h5"), test::read_file(scratch / "out-2/train-00000.h5"));
  const auto reopened = open_dataset_tokenizer(scratch / "out-1");
  EXPECT_EQ(reopened->eos_id(), 261);
  const auto tokens = dataset.read_all(Split::train);
  ASSERT_FALSE(tokens.empty());
  EXPECT_EQ(tokens.back(), 261);
  // The document's own <|endoftext|> is its special token; decoding leaves it out.
  const Ids first(tokens.begin(), std::find(tokens.begin(), tokens.end(), 261));
  EXPECT_NE(std::find(first.begin(), first.end(), 260), first.end());
  EXPECT_EQ(reopened->decode(first), "hello document 0 caf\xC3\xA9x\n");  // its line end kept
}

}  // namespace
}  // namespace ustrain
