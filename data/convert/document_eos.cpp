#include "data/convert/document_eos.h"

#include <array>
#include <string_view>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "data/tokenizers/hf_tokenizer.h"
#include "kernels/error.h"

namespace ustrain {
namespace {

// Tokens that end one turn of a chat, not a document: what chat models' configs name as EOS.
constexpr std::array<std::string_view, 4> kChatTurnEnds = {"<|im_end|>", "<|eot_id|>", "<|end|>", "<end_of_turn>"};
// The end-of-text tokens of those same tokenizers, preferred in this order.
constexpr std::array<std::string_view, 2> kTextEnds = {"<|endoftext|>", "<|end_of_text|>"};

template <std::size_t N>
bool is_one_of(const std::string& token, const std::array<std::string_view, N>& names) {
  for (std::string_view name : names)
    if (token == name) return true;
  return false;
}

std::int32_t special_token_id(const HfTokenizer& tokenizer, std::string_view content) {
  for (const AddedToken& t : tokenizer.added_tokens())
    if (t.special && t.content == content) return t.id;
  return -1;
}

// "<|endoftext|>, <|im_start|>, <|im_end|> and 290 more": the special tokens, for a refusal.
std::string some_special_tokens(const HfTokenizer& tokenizer) {
  constexpr std::size_t kShown = 6;
  std::vector<std::string> names;
  std::size_t specials = 0;
  for (const AddedToken& t : tokenizer.added_tokens())
    if (t.special && ++specials <= kShown) names.push_back(abbreviate(t.content));
  if (names.empty()) return "it has no special tokens";
  return fmt::format("its special tokens are {}{}", fmt::join(names, ", "),
                     specials > kShown ? fmt::format(" and {} more", specials - kShown) : "");
}

std::int32_t resolve_choice(const HfTokenizer& tokenizer, const EosChoice& choice, const std::string& label) {
  if (!choice.token.empty()) {
    const std::int32_t id = tokenizer.token_id(choice.token);
    if (id < 0)
      throw UserError(fmt::format("--eos-token {} is not a token of {} (neither in its vocabulary nor among its added "
                                  "tokens); {}: name one of them",
                                  abbreviate(choice.token), label, some_special_tokens(tokenizer)));
    return id;
  }
  if (choice.id >= tokenizer.vocab_size())
    throw UserError(fmt::format("--eos-id {} is outside the vocabulary of {} ({} ids); pass an id below {}, or the "
                                "token by name with --eos-token",
                                choice.id, label, tokenizer.vocab_size(), tokenizer.vocab_size()));
  return static_cast<std::int32_t>(choice.id);
}

// Byte and sentencepiece tokenizers keep their own EOS: datasets and checkpoints reopen them
// from the model alone.
void check_fixed_eos(const Tokenizer& tokenizer, const EosChoice& choice, const std::string& label) {
  const std::string kind = tokenizer.identity() == "byte" ? "the byte tokenizer" : label;
  if (!choice.token.empty())
    throw UserError(fmt::format("--eos-token {} applies to Hugging Face tokenizer.json and .tiktoken files; {} ends "
                                "documents with its own EOS (id {}): leave --eos-token out",
                                abbreviate(choice.token), kind, tokenizer.eos_id()));
  if (choice.id >= 0 && choice.id != tokenizer.eos_id())
    throw UserError(fmt::format("--eos-id {} disagrees with {}, whose EOS is {}: leave --eos-id out, or pass {}",
                                choice.id, kind, tokenizer.eos_id(), tokenizer.eos_id()));
}

}  // namespace

std::string choose_document_eos(Tokenizer& tokenizer, const EosChoice& choice, const std::string& label) {
  auto* hf = dynamic_cast<HfTokenizer*>(&tokenizer);
  if (hf == nullptr) {
    check_fixed_eos(tokenizer, choice, label);
    return "";
  }
  const bool chosen = !choice.token.empty() || choice.id >= 0;
  if (chosen) {
    hf->set_eos_id(resolve_choice(*hf, choice, label));
    return fmt::format("documents end with {} (id {}), as --eos-{} chose", abbreviate(hf->token(hf->eos_id())),
                       hf->eos_id(), choice.token.empty() ? "id" : "token");
  }
  if (hf->eos_id() < 0) return "";
  const std::string configured = hf->token(hf->eos_id());
  const std::string shown = abbreviate(configured);
  if (is_one_of(configured, kChatTurnEnds)) {
    for (std::string_view name : kTextEnds) {
      const std::int32_t id = special_token_id(*hf, name);
      if (id < 0) continue;
      hf->set_eos_id(id);
      return fmt::format("documents end with {} (id {}), not {}, the EOS that the tokenizer_config.json beside {} "
                         "names, because that token ends a chat turn; --eos-token {} chooses it instead",
                         name, id, shown, label, shown);
    }
  }
  return fmt::format("documents end with {} (id {}), the tokenizer's EOS; --eos-token chooses another", shown,
                     hf->eos_id());
}

}  // namespace ustrain
