#include "data/convert/tokenizer_training.h"

#include <sentencepiece_trainer.h>

#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <unordered_map>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "data/inputs/compressed_input.h"
#include "data/inputs/document_splitter.h"
#include "data/inputs/duplicate_inputs.h"
#include "data/files/durable_output.h"
#include "data/inputs/input_files.h"
#include "data/inputs/input_format.h"
#include "data/files/portable_random.h"
#include "data/inputs/text_check.h"
#include "data/inputs/text_documents.h"
#include "kernels/error.h"

namespace ustrain {
namespace {

// Keeps a uniform sample of at most `capacity` lines (reservoir sampling), so any corpus
// size fits in memory; the sample depends only on the seed and the text.
class LineSample final : public DocumentSink {
 public:
  LineSample(std::size_t capacity, std::uint64_t seed) : capacity_(capacity), rng_(seed) {}

  void add_text(std::string text, std::optional<Split>, DocumentOrigin) override {
    std::string_view rest = text;
    while (!rest.empty()) {
      const std::size_t end = std::min(rest.find('\n'), rest.size());
      std::string_view line = rest.substr(0, end);
      rest.remove_prefix(std::min(end + 1, rest.size()));
      if (line.ends_with('\r')) line.remove_suffix(1);
      if (line.find_first_not_of(" \t") == std::string_view::npos) continue;
      ++seen_;
      if (lines_.size() < capacity_) {
        lines_.emplace_back(line);
      } else if (const std::uint64_t slot = rng_.below(seen_); slot < capacity_) {
        lines_[slot] = std::string(line);
      }
    }
  }
  void add_tokens(std::span<const std::int32_t>, bool, bool, std::optional<Split>) override {}
  void advance(std::int64_t bytes) override { bytes_ += bytes; }

  std::vector<std::string>& lines() { return lines_; }
  std::int64_t seen() const { return static_cast<std::int64_t>(seen_); }
  std::int64_t bytes() const { return bytes_; }

 private:
  std::size_t capacity_;
  SplitMix64 rng_;
  std::vector<std::string> lines_;
  std::uint64_t seen_ = 0;
  std::int64_t bytes_ = 0;
};

class LineIterator final : public sentencepiece::SentenceIterator {
 public:
  explicit LineIterator(const std::vector<std::string>& lines) : lines_(lines) {}
  bool done() const override { return at_ >= lines_.size(); }
  void Next() override { ++at_; }
  const std::string& value() const override { return lines_[at_]; }
  sentencepiece::util::Status status() const override { return {}; }

 private:
  const std::vector<std::string>& lines_;
  std::size_t at_ = 0;
};

// Training can take hours, so a model that could not be written is refused before it starts.
void check_output(const std::string& output) {
  namespace fs = std::filesystem;
  if (output.empty()) throw UserError("no output given: name the .model file to write, e.g. --output tok.model");
  if (fs::exists(output))
    throw UserError(fmt::format("{} exists already: choose another --output, or delete it first", output));
  const fs::path parent = fs::absolute(output).parent_path();
  if (!fs::is_directory(parent))
    throw UserError(fmt::format("the directory of --output {}, {}, does not exist: create it first (mkdir -p {}) or "
                                "choose another --output",
                                output, parent.string(), parent.string()));
  if (::access(parent.c_str(), W_OK) != 0)
    throw UserError(fmt::format("cannot write --output {}: no permission to create files in {}", output,
                                parent.string()));
}

void validate(const TokenizerTrainOptions& o) {
  if (o.inputs.empty()) throw UserError("no inputs given: name the text files or directories to train on");
  check_output(o.output);
  if (o.model_type != "bpe" && o.model_type != "unigram")
    throw UserError(fmt::format("model type '{}' is neither bpe nor unigram", o.model_type));
  if (o.vocab_size < 260 || o.vocab_size > (1 << 20))
    throw UserError(fmt::format("vocab size {} is outside 260 to 1048576: the 256 byte-fallback pieces and the "
                                "special pieces alone need 258",
                                o.vocab_size));
  if (o.max_sentences < 1) throw UserError("max_sentences must be at least 1");
}

// The format given, or the one detected, which must be text or JSONL.
std::string input_format(const TokenizerTrainOptions& o, const NameFilter& filter,
                         const std::function<void(const std::string&)>& say) {
  if (!o.format.empty()) {
    if (o.format != "text" && o.format != "jsonl")
      throw UserError(fmt::format("unknown format '{}' for tokenizer training: use text or jsonl", o.format));
    return o.format;
  }
  const DetectedFormat detected = detect_input_format(o.inputs, filter);
  if (detected.format != "text" && detected.format != "jsonl")
    throw UserError(fmt::format("tokenizer training reads text or JSONL, but the input is {} ({}); train on the "
                                "text the ids were made from, or pass --format text to read the files as text",
                                detected.format, detected.reason));
  say(fmt::format("input format {}: {} (--format chooses another)", detected.format, detected.reason));
  return detected.format;
}

// sentencepiece's trainer options for `o`: its byte-fallback, digit-splitting, whitespace-keeping
// model with <unk> = 0 and EOS = 1, over the sample the caller hands it.
std::unordered_map<std::string, std::string> trainer_arguments(const TokenizerTrainOptions& o) {
  return {
      {"model_type", o.model_type},
      {"vocab_size", std::to_string(o.vocab_size)},
      {"character_coverage", fmt::format("{}", o.character_coverage)},
      {"normalization_rule_name", "identity"},
      {"remove_extra_whitespaces", "false"},
      {"add_dummy_prefix", "false"},
      {"allow_whitespace_only_pieces", "true"},
      {"split_digits", "true"},
      {"byte_fallback", "true"},
      {"unk_id", "0"},
      {"eos_id", "1"},
      {"bos_id", "-1"},
      {"pad_id", "-1"},
      {"input_sentence_size", "0"},  // the caller's sample is the input
      {"max_sentence_length", "16384"},
      {"num_threads", std::to_string(std::max(o.threads, 1))},
      {"minloglevel", "2"},
  };
}

// Written under a temporary name and renamed, so a model file is never half-written.
void write_model_file(const std::string& model, const std::string& output) {
  const std::string partial = output + ".incomplete";
  {
    std::ofstream out(partial, std::ios::binary | std::ios::trunc);
    out.write(model.data(), static_cast<std::streamsize>(model.size()));
    out.flush();
    if (!out) throw UserError(fmt::format("cannot write {} (disk full or no permission?)", partial));
  }
  fsync_path(partial);
  std::error_code error;
  std::filesystem::rename(partial, output, error);
  if (error) throw UserError(fmt::format("cannot move {} to {}: {}", partial, output, error.message()));
}

}  // namespace

TokenizerTrainReport train_tokenizer(const TokenizerTrainOptions& o,
                                     const std::function<void(const std::string&)>& progress) {
  const auto started = std::chrono::steady_clock::now();
  validate(o);
  const auto say = [&](const std::string& line) {
    if (progress) progress(line);
  };
  const NameFilter filter{o.include, o.exclude};
  const std::string format = input_format(o, filter, say);
  std::vector<SkippedEntry> not_files;  // dangling or looping links, FIFOs, devices
  std::vector<InputFile> files = list_input_files(o.inputs, filter, &not_files);
  SkippedFiles skipped;
  if (format == "text") files = keep_text_files(files, skipped);
  // Like `data convert`, a directory read as JSONL contributes only its *.jsonl files
  // (compressed or not).
  if (format == "jsonl")
    std::erase_if(files, [](const InputFile& file) {
      return file.in_directory && !without_compression_suffix(file.path).ends_with(".jsonl");
    });
  if (files.empty())
    throw UserError(fmt::format("no input files found for tokenizer training in {}{}{}{}", fmt::join(o.inputs, ", "),
                                filter.describe(), skipped.count() > 0 ? "; " + skipped.describe() : "",
                                not_files.empty() ? "" : "; " + describe_skipped(not_files)));
  if (skipped.count() > 0) say(skipped.describe());
  if (!not_files.empty()) say(describe_skipped(not_files));
  std::vector<DuplicateInput> duplicates;  // links and copies would weigh their lines twice
  files = drop_duplicate_inputs(files, duplicates);
  if (!duplicates.empty()) say(describe_duplicates(duplicates));
  LineSample sample(static_cast<std::size_t>(o.max_sentences), o.seed);
  if (format == "text") read_text_files(files, o.split, o.max_document_bytes, sample);
  else read_jsonl_files(files, o.text_field, o.max_document_bytes, sample);
  if (sample.lines().empty()) throw UserError("the inputs hold no text to train a tokenizer on");
  say(fmt::format("training a {} sentencepiece model of {} pieces on {} of {} lines ({:.1f} MB read)", o.model_type,
                  o.vocab_size, sample.lines().size(), sample.seen(), static_cast<double>(sample.bytes()) / 1e6));

  const std::unordered_map<std::string, std::string> arguments = trainer_arguments(o);
  LineIterator lines(sample.lines());
  std::string model;
  const auto status = sentencepiece::SentencePieceTrainer::Train(arguments, &lines, &model);
  if (!status.ok())
    throw UserError(fmt::format("sentencepiece could not train on {}: {}", o.inputs.front(), status.error_message()));

  write_model_file(model, o.output);

  TokenizerTrainReport report;
  report.lines_read = sample.seen();
  report.lines_used = static_cast<std::int64_t>(sample.lines().size());
  report.bytes_read = sample.bytes();
  report.vocab_size = o.vocab_size;
  report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  return report;
}

}  // namespace ustrain
