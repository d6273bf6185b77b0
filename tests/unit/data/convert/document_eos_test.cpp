// The token that ends a conversion's documents: a chat model's tokenizer_config.json names the
// end of a chat turn (<|im_end|>), which gives way to <|endoftext|>; the user may name the token
// or its id; tokenizers whose EOS is fixed refuse another.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "data/tokenizers/byte_level.h"
#include "data/convert/convert.h"
#include "data/shards/dataset.h"
#include "data/convert/document_eos.h"
#include "data/tokenizers/hf_tokenizer.h"
#include "tests/unit/data/test_support.h"

namespace ustrain {
namespace {

using Json = nlohmann::json;

// A Qwen-like byte-level tokenizer: the 256 bytes, then <|endoftext|> 256, <|im_start|> 257 and
// <|im_end|> 258; tokenizer_config.json names `eos` (empty: no config file).
void write_qwen_like(const std::string& dir, const std::string& eos) {
  const ByteLevelAlphabet alphabet;
  Json vocab = Json::object();
  for (int b = 0; b < 256; ++b) vocab[alphabet.character(static_cast<unsigned char>(b))] = b;
  Json added = Json::array();
  for (const auto& [id, content] : {std::pair{256, "<|endoftext|>"}, {257, "<|im_start|>"}, {258, "<|im_end|>"}})
    added.push_back({{"id", id}, {"content", content}, {"single_word", false}, {"lstrip", false}, {"rstrip", false},
                     {"normalized", false}, {"special", true}});
  Json j = {{"added_tokens", added}, {"normalizer", nullptr}, {"decoder", {{"type", "ByteLevel"}}}};
  j["pre_tokenizer"] = {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}};
  j["model"] = {{"type", "BPE"}, {"vocab", vocab}, {"merges", Json::array()}, {"unk_token", nullptr}};
  test::write_file(dir + "/tokenizer.json", j.dump());
  if (!eos.empty()) test::write_file(dir + "/tokenizer_config.json", Json{{"eos_token", eos}}.dump());
}

std::int32_t chosen_eos(const std::string& file, const EosChoice& choice, std::string* note = nullptr) {
  const auto tokenizer = HfTokenizer::from_file(file);
  const std::string said = choose_document_eos(*tokenizer, choice, file);
  if (note) *note = said;
  return tokenizer->eos_id();
}

TEST(DocumentEos, AChatTurnEndGivesWayToEndOfText) {
  test::ScratchDir scratch;
  write_qwen_like(scratch / "chat", "<|im_end|>");
  std::string note;
  EXPECT_EQ(chosen_eos(scratch / "chat/tokenizer.json", {}, &note), 256);
  EXPECT_NE(note.find("documents end with <|endoftext|> (id 256), not <|im_end|>"), std::string::npos) << note;
  EXPECT_NE(note.find("--eos-token <|im_end|>"), std::string::npos) << note;
  write_qwen_like(scratch / "base", "<|endoftext|>");
  EXPECT_EQ(chosen_eos(scratch / "base/tokenizer.json", {}, &note), 256);
  EXPECT_NE(note.find("the tokenizer's EOS"), std::string::npos) << note;
}

TEST(DocumentEos, TheUserChoosesByNameOrId) {
  test::ScratchDir scratch;
  write_qwen_like(scratch / "chat", "<|im_end|>");
  const std::string file = scratch / "chat/tokenizer.json";
  EXPECT_EQ(chosen_eos(file, {"<|im_end|>", -1}), 258);
  EXPECT_EQ(chosen_eos(file, {"", 257}), 257);
  EXPECT_EQ(chosen_eos(file, {"a", -1}), 97);  // a vocabulary token serves too
  test::expect_user_error([&] { chosen_eos(file, {"<|end|>", -1}); },
                          {"--eos-token <|end|> is not a token of " + file, "<|endoftext|>, <|im_start|>, <|im_end|>"});
  test::expect_user_error([&] { chosen_eos(file, {"", 259}); }, {"--eos-id 259", file, "259 ids"});
}

TEST(DocumentEos, AConversionRecordsTheChosenEosAndTextTakesEosId) {
  test::ScratchDir scratch;
  write_qwen_like(scratch / "chat", "<|im_end|>");
  test::write_file(scratch / "a.txt", "one\n\ntwo\n");
  ConvertOptions options;
  options.inputs = {scratch / "a.txt"};
  options.tokenizer = scratch / "chat/tokenizer.json";
  options.val_fraction = 0;
  options.output_dir = scratch / "default";
  convert_dataset(options);
  EXPECT_EQ(TokenDataset::open(scratch / "default").tokenizer().eos_id, 256);
  options.output_dir = scratch / "by-id";
  options.eos_id = 258;
  convert_dataset(options);
  const auto ids = test::read_token_documents(TokenDataset::open(scratch / "by-id"), Split::train);
  ASSERT_EQ(ids.size(), 2u);
  EXPECT_EQ(ids[0].back(), 258);
  options.tokenizer = "byte";
  options.output_dir = scratch / "byte";
  test::expect_user_error([&] { convert_dataset(options); }, {"--eos-id 258 disagrees with the byte tokenizer", "256"});
  options.eos_id = -1;
  options.eos_token = "<|endoftext|>";
  test::expect_user_error([&] { convert_dataset(options); }, {"--eos-token <|endoftext|> applies to Hugging Face"});
  EXPECT_FALSE(std::filesystem::exists(scratch / "byte"));
}

}  // namespace
}  // namespace ustrain
