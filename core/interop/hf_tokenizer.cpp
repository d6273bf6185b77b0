#include "core/interop/hf_tokenizer.h"

#include <fmt/format.h>

#include <map>
#include <nlohmann/json.hpp>

#include "core/checkpoint/fs.h"
#include "data/tokenizers/byte_tokenizer.h"
#include "data/tokenizers/hf_tokenizer.h"
#include "data/tokenizers/sentencepiece_tokenizer.h"
#include "kernels/error.h"

namespace ustrain {
namespace {

using Json = nlohmann::ordered_json;

// An AddedToken as tokenizer files spell it: matched as written, never split or normalised.
Json added_token(const std::string& content) {
  return {{"content", content}, {"lstrip", false}, {"normalized", false}, {"rstrip", false}, {"single_word", false}};
}

std::unique_ptr<SentencePieceTokenizer> open_model(const TokenizerSnapshot& t) {
  return SentencePieceTokenizer::from_bytes(t.model, "the checkpoint's " + std::string(kCheckpointTokenizerModel));
}

std::optional<std::int64_t> id_or_none(std::int32_t id) {
  return id >= 0 ? std::optional<std::int64_t>(id) : std::nullopt;
}

std::unique_ptr<HfTokenizer> open_json(const TokenizerSnapshot& t) {
  return HfTokenizer::with_eos_id(t.model, "the checkpoint's " + std::string(kCheckpointTokenizerJson), t.identity.eos_id);
}

// A tokenizer.json's BOS: the first special token of the conventional names, else none.
std::optional<std::int64_t> conventional_bos(const HfTokenizer& t) {
  for (const char* name : {"<s>", "<|begin_of_text|>", "<|startoftext|>", "<bos>"})
    for (const AddedToken& added : t.added_tokens())
      if (added.special && added.content == name) return added.id;
  return std::nullopt;
}

// tokenizer_config.json for a tokenizer.json: the fast tokenizer class, its added tokens, and
// which of them are BOS, EOS and padding. The tokenizer.json is written as it is.
std::vector<std::string> write_json_tokenizer_files(const std::string& dir, const TokenizerSnapshot& tokenizer,
                                                    std::int64_t max_seq_len) {
  const auto model = open_json(tokenizer);
  const HfTokenIds ids = hf_token_ids(tokenizer);
  const auto content = [&](std::optional<std::int64_t> id) {
    return id ? Json(model->token(static_cast<std::int32_t>(*id))) : Json(nullptr);
  };
  Json decoder = Json::object();
  for (const AddedToken& t : model->added_tokens())
    decoder[std::to_string(t.id)] = {{"content", t.content}, {"lstrip", t.lstrip},   {"normalized", t.normalized},
                                     {"rstrip", t.rstrip},   {"single_word", t.single_word}, {"special", t.special}};
  Json config;
  config["added_tokens_decoder"] = decoder;
  config["bos_token"] = content(ids.bos);
  config["clean_up_tokenization_spaces"] = false;
  config["eos_token"] = content(ids.eos);
  config["model_max_length"] = max_seq_len;
  config["pad_token"] = content(ids.pad);
  config["tokenizer_class"] = "PreTrainedTokenizerFast";
  write_text_file(dir + "/tokenizer.json", tokenizer.model);
  write_text_file(dir + "/tokenizer_config.json", config.dump(2) + "\n");
  return {"tokenizer.json", "tokenizer_config.json"};
}

}  // namespace

HfTokenIds hf_token_ids(const TokenizerSnapshot& tokenizer) {
  const TokenizerIdentity& t = tokenizer.identity;
  if (t.kind == "byte") return {t.eos_id, t.eos_id, t.eos_id};  // EOS separates documents and starts one
  if (t.kind == "huggingface") {
    const auto model = open_json(tokenizer);
    const std::optional<std::int64_t> eos = id_or_none(t.eos_id);
    const std::optional<std::int64_t> bos = conventional_bos(*model);
    return {bos ? bos : eos, eos, eos};
  }
  if (t.kind != "sentencepiece") return {std::nullopt, id_or_none(t.eos_id), std::nullopt};
  const auto model = open_model(tokenizer);
  const std::optional<std::int64_t> eos = id_or_none(model->eos_id());
  const std::optional<std::int64_t> bos = model->bos_id() >= 0 ? id_or_none(model->bos_id()) : eos;
  const std::optional<std::int64_t> pad = model->pad_id() >= 0 ? id_or_none(model->pad_id()) : eos;
  return {bos, eos, pad};
}

std::string generation_config_json(const HfTokenIds& ids) {
  Json j = Json::object();
  if (ids.bos) j["bos_token_id"] = *ids.bos;
  if (ids.eos) j["eos_token_id"] = *ids.eos;
  if (ids.pad) j["pad_token_id"] = *ids.pad;
  return j.dump(2) + "\n";
}

std::vector<std::string> write_hf_tokenizer_files(const std::string& dir, const TokenizerSnapshot& tokenizer,
                                                  std::int64_t max_seq_len) {
  if (tokenizer.identity.kind == "huggingface") return write_json_tokenizer_files(dir, tokenizer, max_seq_len);
  if (tokenizer.identity.kind != "sentencepiece") return {};
  const auto model = open_model(tokenizer);
  const HfTokenIds ids = hf_token_ids(tokenizer);
  const auto piece = [&](std::optional<std::int64_t> id) {
    return id ? Json(model->raw_piece(static_cast<std::int32_t>(*id))) : Json(nullptr);
  };
  const std::optional<std::int64_t> unk = id_or_none(model->unk_id());

  std::map<std::int64_t, Json> specials;  // by id, as Hugging Face lists them
  for (const auto& id : {unk, ids.bos, ids.eos, ids.pad})
    if (id) specials[*id] = added_token(model->raw_piece(static_cast<std::int32_t>(*id)));
  Json decoder = Json::object();
  for (const auto& [id, token] : specials) {
    Json special = token;
    special["special"] = true;
    decoder[std::to_string(id)] = special;
  }
  // legacy: the model encodes as it is (with its own add_dummy_prefix, which add_prefix_space
  // repeats for the converted fast tokenizer and for decoding).
  Json config;
  config["add_bos_token"] = false;
  config["add_eos_token"] = false;
  config["add_prefix_space"] = model->adds_dummy_prefix();
  config["added_tokens_decoder"] = decoder;
  config["bos_token"] = piece(ids.bos);
  config["clean_up_tokenization_spaces"] = false;
  config["eos_token"] = piece(ids.eos);
  config["legacy"] = true;
  config["model_max_length"] = max_seq_len;
  config["pad_token"] = piece(ids.pad);
  config["sp_model_kwargs"] = Json::object();
  config["spaces_between_special_tokens"] = false;
  config["tokenizer_class"] = "LlamaTokenizer";
  config["unk_token"] = piece(unk);

  Json map = Json::object();
  for (const auto& [name, id] : {std::pair{"bos_token", ids.bos}, std::pair{"eos_token", ids.eos},
                                 std::pair{"pad_token", ids.pad}, std::pair{"unk_token", unk}})
    if (id) map[name] = added_token(model->raw_piece(static_cast<std::int32_t>(*id)));

  write_text_file(dir + "/tokenizer.model", tokenizer.model);
  write_text_file(dir + "/tokenizer_config.json", config.dump(2) + "\n");
  write_text_file(dir + "/special_tokens_map.json", map.dump(2) + "\n");
  return {"tokenizer.model", "tokenizer_config.json", "special_tokens_map.json"};
}

TokenizerSnapshot import_tokenizer(const std::string& choice, const HfModelFiles& model, const Recipe& recipe,
                                   std::string& how) {
  const std::int64_t vocab = recipe.model.vocab_size;
  const HfTokenIds config_ids =
      model.config ? token_ids_from_llama_config(read_text_file(*model.config), *model.config) : HfTokenIds{};
  // A tokenizer ustrain does not read: the model's ids stay those of an external tokenizer.
  const auto unknown = [&] {
    const std::int64_t eos = config_ids.eos && *config_ids.eos >= 0 && *config_ids.eos < vocab ? *config_ids.eos : -1;
    return TokenizerSnapshot{{"external", "unknown", vocab, static_cast<std::int32_t>(eos), "", ""}, {}};
  };
  const bool names_data = !recipe.data.path.empty() || !recipe.data.blend.empty();
  TokenizerSnapshot t;
  if (choice == "byte") {
    t = byte_tokenizer_snapshot();
    how = "--tokenizer byte";
  } else if (choice == "none") {
    t = unknown();
    how = "--tokenizer none";
  } else if (choice != "auto") {
    t = model_file_snapshot(choice, config_ids.eos);
    how = choice;
  } else if (model.tokenizer_model) {
    t = model_file_snapshot(*model.tokenizer_model);
    how = *model.tokenizer_model;
  } else if (model.tokenizer_json) {
    t = model_file_snapshot(*model.tokenizer_json, config_ids.eos);
    how = *model.tokenizer_json;
  } else if ((recipe.data.tokenizer == "byte" && names_data) ||
             ((recipe.data.tokenizer == "byte" || recipe.data.tokenizer == "auto") && !names_data &&
              config_ids.eos == ByteTokenizer::kEos && vocab > ByteTokenizer::kEos)) {
    t = byte_tokenizer_snapshot();
    how = names_data ? "the recipe's [data]" : "config.json's eos_token_id 256, the byte tokenizer's";
  } else if (names_data) {
    try {
      t = dataset_tokenizer_snapshot(recipe.data);
    } catch (const UserError& e) {
      throw UserError(fmt::format("{}: the model has no tokenizer.model beside it, so its tokenizer was to come from "
                                  "the recipe's dataset, which failed: {}; pass --tokenizer byte|none|FILE.model|tokenizer.json",
                                  model.config.value_or(model.files.front()), e.what()));
    }
    how = "the recipe's dataset";
  } else {
    t = unknown();
    how = "nowhere ustrain reads: no tokenizer.model or tokenizer.json beside the weights; pass --tokenizer byte, "
          "FILE.model or tokenizer.json to keep one";
  }
  if (t.identity.vocab_size > vocab)
    throw UserError(fmt::format("the tokenizer from {} has {} ids but the model's vocabulary only {}: it is not this "
                                "model's tokenizer; pass the right one with --tokenizer",
                                how, t.identity.vocab_size, vocab));
  return t;
}

}  // namespace ustrain
