#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <thread>

#include "app/cmd_data_commands.h"
#include "app/number_checks.h"
#include "data/convert/tokenizer_training.h"
#include "kernels/error.h"

namespace ustrain::app {
namespace {

// sentencepiece's own spm_train flags, which people bring from its documentation: each is
// answered with ustrain's option, or with what ustrain sets in its place.
struct SentencepieceFlag {
  const char* flag;
  const char* answer;
};
constexpr SentencepieceFlag kSentencepieceFlags[] = {
    {"--vocab_size", "use --vocab-size N"},
    {"--model_type", "use --model-type bpe|unigram"},
    {"--character_coverage", "use --character-coverage F"},
    {"--model_prefix", "use --output PREFIX.model (the whole file name)"},
    {"--input_sentence_size", "use --max-sentences N (lines sampled, fixed by --seed)"},
    {"--shuffle_input_sentence", "lines are always sampled, by --seed"},
    {"--num_threads", "use --threads N"},
    {"--input_format", "use --format text|jsonl"},
    {"--byte_fallback", "ustrain always trains with byte fallback"},
    {"--split_digits", "ustrain always splits digits"},
    {"--normalization_rule_name", "ustrain always trains without normalisation (identity), so nothing is lost"},
    {"--remove_extra_whitespaces", "ustrain always keeps whitespace as it is"},
    {"--add_dummy_prefix", "ustrain always trains without a dummy prefix"},
    {"--unk_id", "ustrain fixes the ids: 0 <unk>, 1 </s> (EOS), no BOS or padding"},
    {"--bos_id", "ustrain fixes the ids: 0 <unk>, 1 </s> (EOS), no BOS or padding"},
    {"--eos_id", "ustrain fixes the ids: 0 <unk>, 1 </s> (EOS), no BOS or padding"},
    {"--pad_id", "ustrain fixes the ids: 0 <unk>, 1 </s> (EOS), no BOS or padding"},
};

void answer_sentencepiece_flags(CLI::App& train) {
  for (const SentencepieceFlag& f : kSentencepieceFlags) {
    const std::string flag = f.flag, answer = f.answer;
    train
        .add_option_function<std::string>(
            flag,
            [flag, answer](const std::string&) {
              throw UserError(fmt::format("{} is sentencepiece's spm_train flag, not an option of `ustrain data "
                                          "tokenizer train`: {} (--help lists the options)",
                                          flag, answer));
            })
        ->expected(0, 1)
        ->group("");  // hidden from --help
  }
}

// sentencepiece's --input=a.txt,b.txt names files with commas; ours takes them one by one.
void check_comma_lists(const std::vector<std::string>& inputs) {
  for (const std::string& input : inputs)
    if (input.find(',') != std::string::npos && !std::filesystem::exists(input))
      throw UserError(fmt::format("input {} does not exist: if it lists files as sentencepiece's --input does, "
                                  "separate them by spaces instead (--input a.txt b.txt)",
                                  input));
}

}  // namespace

void add_data_tokenizer_command(CLI::App& data) {
  CLI::App* tokenizer = data.add_subcommand("tokenizer", "Make tokenizers");
  tokenizer->require_subcommand(1);
  auto o = std::make_shared<TokenizerTrainOptions>();
  o->threads = static_cast<int>(std::clamp(std::thread::hardware_concurrency(), 1u, 8u));
  CLI::App* train = tokenizer->add_subcommand(
      "train", "Train a sentencepiece BPE or unigram model on text or JSONL (lossless: no normalisation, byte "
               "fallback)");
  train->add_option("--input,-i", o->inputs, "Text or JSONL files or directories")->required();
  train->add_option("--output,-o", o->output, "The .model file to write (must not exist; its directory must)")
      ->required();
  train->add_option("--vocab-size", o->vocab_size, "Pieces in the vocabulary, specials and 256 byte pieces included")
      ->capture_default_str();
  train->add_option("--model-type", o->model_type, "Algorithm")
      ->capture_default_str()
      ->check(CLI::IsMember({"bpe", "unigram"}));
  train->add_option("--format,-f", o->format,
                    "Input format; default: detected from the input (extension or content), as the first line on "
                    "stderr says")
      ->check(CLI::IsMember({"text", "jsonl"}));
  train->add_option("--split", o->split, "text: how files divide into documents: file | blank-line | line:MARKER")
      ->capture_default_str();
  train->add_option("--text-field", o->text_field, "jsonl: the field that holds the text")->capture_default_str();
  add_max_document_option(*train, o->max_document_bytes);
  train->add_option("--include", o->include,
                    "File-name globs to take (repeatable; default: every file; files in directories that are not "
                    "text are skipped)");
  train->add_option("--exclude", o->exclude, "File-name globs to skip (repeatable)");
  train->add_option("--max-sentences", o->max_sentences, "Lines sampled from the corpus for training")
      ->capture_default_str()
      ->check(positive());
  train->add_option("--character-coverage", o->character_coverage,
                    "Share of characters covered by pieces; the rest fall back to bytes")
      ->capture_default_str()
      ->check(CLI::Range(0.9, 1.0));
  train->add_option("--seed", o->seed, "Seed of the line sample")->capture_default_str();
  train->add_option("--threads,-j", o->threads, "Training threads")->capture_default_str()->check(CLI::Range(1, 256));
  answer_sentencepiece_flags(*train);
  train->callback([o] {
    check_comma_lists(o->inputs);
    const TokenizerTrainReport r =
        train_tokenizer(*o, [](const std::string& line) { std::fprintf(stderr, "%s\n", line.c_str()); });
    fmt::print("wrote {}: {} model of {} pieces from {} of {} lines ({:.1f} MB) in {:.1f} s\n", o->output,
               o->model_type, r.vocab_size, r.lines_used, r.lines_read, static_cast<double>(r.bytes_read) / 1e6,
               r.seconds);
  });
}

}  // namespace ustrain::app
