#include "data/convert/convert.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <filesystem>
#include <memory>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "data/inputs/compressed_input.h"
#include "data/files/crc32.h"
#include "data/convert/dataset_builder.h"
#include "data/convert/dataset_documents.h"
#include "data/shards/dataset_tokenizer.h"
#include "data/convert/document_eos.h"
#include "data/inputs/document_splitter.h"
#include "data/inputs/duplicate_inputs.h"
#include "data/files/durable_output.h"
#include "data/inputs/input_files.h"
#include "data/inputs/input_format.h"
#include "data/inputs/llmc_format.h"
#include "data/inputs/megatron_format.h"
#include "data/inputs/npy_format.h"
#include "data/inputs/text_check.h"
#include "data/inputs/text_documents.h"
#include "kernels/error.h"

namespace ustrain {
namespace fs = std::filesystem;

namespace {

constexpr std::int32_t kLlmcDefaultEos = 50256;  // GPT-2's <|endoftext|>, what llm.c's own shards use

bool is_text_format(const std::string& format) { return format == "text" || format == "jsonl"; }
bool is_id_format(const std::string& format) { return format == "megatron" || format == "llmc" || format == "npy"; }

void validate_paths(const ConvertOptions& o) {
  if (o.inputs.empty()) throw UserError("no inputs given: name the files or directories to convert");
  if (o.output_dir.empty()) throw UserError("no output directory given for the converted dataset");
}

void validate(const ConvertOptions& o) {
  if (!is_text_format(o.format) && !is_id_format(o.format) && o.format != "shards")
    throw UserError(fmt::format("unknown input format '{}': use one of text, jsonl, megatron, llmc, npy, shards", o.format));
  if (!(o.val_fraction >= 0 && o.val_fraction < 1))
    throw UserError(fmt::format("val_fraction {} is outside [0, 1): it is the share of documents held out for "
                                "validation, e.g. 0.05",
                                o.val_fraction));
  if (o.shard_tokens <= 0) throw UserError(fmt::format("shard_tokens {} must be positive", o.shard_tokens));
  if (o.compression < 0 || o.compression > 9)
    throw UserError(fmt::format("compression level {} is outside 0 (none) to 9", o.compression));
  if (o.workers < 1 || o.workers > 256) throw UserError(fmt::format("workers {} is outside 1 to 256", o.workers));
  if (o.max_document_bytes <= 0)
    throw UserError(fmt::format("maximum document size {} bytes must be positive", o.max_document_bytes));
  if (o.eos_id >= 0 && !o.eos_token.empty())
    throw UserError(fmt::format("--eos-id {} and --eos-token {} both name the end-of-document token: pass one of them",
                                o.eos_id, abbreviate(o.eos_token)));
}

// How documents are tokenized and what the dataset records about it.
struct TokenizerPlan {
  std::unique_ptr<Tokenizer> encoder;  // encodes text documents
  std::unique_ptr<Tokenizer> decoder;  // shards: decodes the input before re-encoding
  TokenizerIdentity identity;          // model_file/checksum filled in when the model is copied
  std::string model_to_copy;           // a tokenizer file copied into the dataset as it is
  std::string model_bytes;             // or the file's bytes (a tokenizer.json, converted tiktoken)
  std::string model_name;              // its name in the dataset
  bool text_out = false;               // documents arrive as text (append EOS by default)
  std::string eos_note;                // which token ends documents, for the user
};

TokenizerIdentity identity_of(const Tokenizer& tokenizer) {
  TokenizerIdentity identity;
  identity.kind = identity.name = tokenizer.identity();
  identity.vocab_size = tokenizer.vocab_size();
  identity.eos_id = tokenizer.eos_id();
  return identity;
}

// The tokenizer `spec`, ending documents with the token the options choose (data/convert/document_eos.h).
std::unique_ptr<Tokenizer> open_for_documents(const std::string& spec, const ConvertOptions& o, std::string& eos_note) {
  std::unique_ptr<Tokenizer> tokenizer = open_tokenizer(spec, {o.tiktoken_pattern, o.tiktoken_special_tokens});
  eos_note = choose_document_eos(*tokenizer, {o.eos_token, o.eos_id}, spec);
  return tokenizer;
}

void use_tokenizer(TokenizerPlan& plan, const std::string& spec, const ConvertOptions& o) {
  plan.encoder = open_for_documents(spec, o, plan.eos_note);
  plan.identity = identity_of(*plan.encoder);
  plan.model_bytes = stored_tokenizer_json(*plan.encoder);
  if (!plan.model_bytes.empty()) {
    plan.model_name = kDatasetTokenizerJsonName;
  } else if (spec != "byte") {
    plan.model_to_copy = spec;
    plan.model_name = kDatasetModelFileName;
  }
}

TokenizerPlan plan_for_ids(const ConvertOptions& o) {
  TokenizerPlan plan;
  if (o.tokenizer.empty())
    throw UserError(fmt::format("--format {} reads token ids, so name the tokenizer that made them: e.g. "
                                "--tokenizer gpt2 --vocab-size 50257 (or --tokenizer byte, or a sentencepiece "
                                ".model file)",
                                o.format));
  if (o.tokenizer == "byte" || names_model_file(o.tokenizer)) {
    use_tokenizer(plan, o.tokenizer, o);
    plan.encoder.reset();
    if (o.vocab_size > 0 && o.vocab_size != plan.identity.vocab_size)
      throw UserError(fmt::format("--vocab-size {} disagrees with tokenizer {}, whose vocabulary has {} ids", o.vocab_size,
                                  o.tokenizer, plan.identity.vocab_size));
    return plan;
  }
  const bool plain = std::all_of(o.tokenizer.begin(), o.tokenizer.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.' || c == '+';
  });
  if (!plain)
    throw UserError(
        fmt::format("tokenizer name '{}' may hold only letters, digits and - _ . +", abbreviate(o.tokenizer)));
  if (!o.eos_token.empty())
    throw UserError(fmt::format("--eos-token {} needs a tokenizer file to look the token up, and '{}' names none: "
                                "pass the token's id with --eos-id",
                                abbreviate(o.eos_token), abbreviate(o.tokenizer)));
  if (o.vocab_size <= 0)
    throw UserError(fmt::format("pass --vocab-size: the vocabulary size of tokenizer '{}' (e.g. 50257 for gpt2); "
                                "every id must lie below it",
                                abbreviate(o.tokenizer)));
  plan.identity.kind = "external";
  plan.identity.name = o.tokenizer;
  plan.identity.vocab_size = o.vocab_size;
  plan.identity.eos_id = static_cast<std::int32_t>(o.eos_id >= 0 ? o.eos_id : o.format == "llmc" ? kLlmcDefaultEos : -1);
  if (plan.identity.eos_id >= o.vocab_size)
    throw UserError(fmt::format("EOS id {} is not below --vocab-size {}; pass the right --eos-id", plan.identity.eos_id,
                                o.vocab_size));
  return plan;
}

TokenizerPlan plan_for_datasets(const ConvertOptions& o, const std::vector<TokenDataset>& datasets) {
  const TokenizerIdentity& input = datasets.front().tokenizer();
  for (const TokenDataset& dataset : datasets)
    if (!(dataset.tokenizer() == input))
      throw UserError(fmt::format("datasets {} and {} use different tokenizers ({} and {}): convert them "
                                  "separately, or re-tokenize each with --tokenizer first",
                                  datasets.front().dir(), dataset.dir(), input.describe(), dataset.tokenizer().describe()));
  const std::string input_model = input.model_file.empty() ? "" : (fs::path(datasets.front().dir()) / input.model_file).string();
  TokenizerPlan plan;
  if (o.tokenizer.empty() && (o.eos_id >= 0 || !o.eos_token.empty()))
    throw UserError("--eos-id and --eos-token choose the token that ends documents as text is tokenized, but "
                    "re-sharding keeps the datasets' ids: name the tokenizer with --tokenizer to re-tokenize");
  // The same model file (a tokenizer.json is stored as it is) with the same EOS.
  const bool same_file = (input.kind == "sentencepiece" || (input.kind == "huggingface" && o.tokenizer.ends_with(".json"))) &&
                         fs::is_regular_file(o.tokenizer) &&
                         crc32_label(crc32_of_file(o.tokenizer)) == input.model_checksum &&
                         (input.kind == "sentencepiece" || open_for_documents(o.tokenizer, o, plan.eos_note)->eos_id() == input.eos_id);
  const bool same = o.tokenizer.empty() || (o.tokenizer == "byte" && input.kind == "byte") || same_file;
  if (same) {  // re-shard: the ids are copied as they are
    plan.identity = input;
    plan.model_to_copy = input_model;
    plan.model_name = input.model_file;
    return plan;
  }
  plan.decoder = open_dataset_tokenizer(datasets.front().dir());
  use_tokenizer(plan, o.tokenizer, o);
  plan.text_out = true;
  return plan;
}

// Token files are read in place (seeks, memory maps), so they cannot be read compressed.
void refuse_compressed_ids(const ConvertOptions& o, const std::vector<InputFile>& files) {
  for (const InputFile& file : files)
    if (without_compression_suffix(file.path) != file.path)
      throw UserError(fmt::format("input {} is compressed, but --format {} reads token files only uncompressed (text "
                                  "and JSONL are read compressed): decompress it first",
                                  file.path, o.format));
}

NameFilter name_filter(const ConvertOptions& o) { return {o.include, o.exclude}; }

// Files of the inputs; from directories only those with `extension` (empty: all; for text
// formats also compressed, e.g. .jsonl.gz). Entries that are no regular file go to `skipped`.
std::vector<InputFile> list_inputs(const ConvertOptions& o, const std::string& extension,
                                   std::vector<SkippedEntry>& skipped) {
  std::vector<InputFile> files;
  for (const std::string& input : o.inputs) {
    for (InputFile& file : list_input_files({input}, name_filter(o), &skipped))
      if (extension.empty() || !fs::is_directory(input) ||
          (is_text_format(o.format) ? without_compression_suffix(file.path) : file.path).ends_with(extension))
        files.push_back(std::move(file));
  }
  return files;
}

std::string describe_source(const ConvertOptions& o, bool append_eos) {
  std::string text = fmt::format("{} {} ({}", o.format, fmt::join(o.inputs, ", "),
                                 o.format == "shards" ? "splits kept" : fmt::format("val_fraction {}, seed {}", o.val_fraction, o.seed));
  if (o.format == "text") text += fmt::format(", split {}", o.split);
  if (o.format == "jsonl") text += fmt::format(", field {}", o.text_field);
  if (!o.include.empty()) text += fmt::format(", include {}", fmt::join(o.include, " "));
  if (!o.exclude.empty()) text += fmt::format(", exclude {}", fmt::join(o.exclude, " "));
  return text + fmt::format(", eos {})", append_eos ? "appended" : "as in the input");
}

void copy_model(TokenizerPlan& plan, const std::string& staging) {
  if (plan.model_to_copy.empty() && plan.model_bytes.empty()) return;
  const std::string target = (fs::path(staging) / plan.model_name).string();
  std::error_code error;
  if (plan.model_bytes.empty()) {
    fs::copy_file(plan.model_to_copy, target, error);
  } else {
    std::unique_ptr<std::FILE, int (*)(std::FILE*)> file(std::fopen(target.c_str(), "wb"), &std::fclose);
    if (!file || std::fwrite(plan.model_bytes.data(), 1, plan.model_bytes.size(), file.get()) != plan.model_bytes.size() ||
        std::fflush(file.get()) != 0)
      error = std::error_code(errno, std::generic_category());
  }
  if (error)
    throw UserError(fmt::format("cannot write tokenizer model {} into {}: {}", plan.model_name, staging, error.message()));
  fsync_path(target);
  plan.identity.model_file = plan.model_name;
  plan.identity.model_checksum = crc32_label(crc32_of_file(target));
}

// What a conversion reads, all found and checked before anything is written.
struct ConvertInputs {
  std::vector<InputFile> files;
  std::vector<std::string> prefixes;  // Megatron's .bin/.idx pairs
  std::vector<TokenDataset> datasets;
  std::int64_t total_bytes = 0;

  std::size_t count() const { return files.size() + prefixes.size() + datasets.size(); }
};

using Say = std::function<void(const std::string&)>;

// The inputs of `o` in its format, and the tokenizer plan that reads them; what was skipped
// (not text, not a file, reached twice) is said.
ConvertInputs find_inputs(const ConvertOptions& o, TokenizerPlan& plan, const Say& say) {
  ConvertInputs in;
  SkippedFiles skipped;
  std::vector<SkippedEntry> not_files;  // dangling or looping links, FIFOs, devices
  if (is_text_format(o.format)) {
    const DocumentSplitter refuses_a_bad_split_mode_now(o.format == "text" ? o.split : "file", o.max_document_bytes);
    use_tokenizer(plan, o.tokenizer.empty() ? "byte" : o.tokenizer, o);
    plan.text_out = true;
    in.files = list_inputs(o, o.format == "jsonl" ? ".jsonl" : "", not_files);
    if (o.format == "text") in.files = keep_text_files(in.files, skipped);
    // A name that promises compression must hold it: told now, before anything is written.
    for (const InputFile& file : in.files) compression_of(file.path);
  } else if (o.format == "megatron") {
    plan = plan_for_ids(o);
    in.prefixes = megatron_prefixes(o.inputs, name_filter(o));
    in.total_bytes = megatron_bytes(in.prefixes);
  } else if (is_id_format(o.format)) {
    plan = plan_for_ids(o);
    in.files = list_inputs(o, o.format == "llmc" ? ".bin" : ".npy", not_files);
    refuse_compressed_ids(o, in.files);
  } else {
    for (const std::string& dir : o.inputs) in.datasets.push_back(TokenDataset::open(dir));
    for (const TokenDataset& dataset : in.datasets)
      for (Split split : {Split::train, Split::val})
        for (const ShardInfo& shard : dataset.shards(split)) in.total_bytes += static_cast<std::int64_t>(shard.bytes);
    plan = plan_for_datasets(o, in.datasets);
  }
  std::vector<DuplicateInput> duplicates;
  in.files = drop_duplicate_inputs(in.files, duplicates);
  for (const InputFile& file : in.files) in.total_bytes += static_cast<std::int64_t>(file.bytes);
  if (in.count() == 0)
    throw UserError(fmt::format("no input files found in {}{}{}{}", fmt::join(o.inputs, ", "), name_filter(o).describe(),
                                skipped.count() > 0 ? "; " + skipped.describe() : "",
                                not_files.empty() ? "" : "; " + describe_skipped(not_files)));
  if (skipped.count() > 0) say(skipped.describe());
  if (!not_files.empty()) say(describe_skipped(not_files));
  if (!duplicates.empty()) say(describe_duplicates(duplicates));
  return in;
}

// Every input's documents into `builder`, by the reader of the format.
void read_inputs(const ConvertOptions& o, const ConvertInputs& in, const TokenizerPlan& plan, DatasetBuilder& builder) {
  if (o.format == "text") read_text_files(in.files, o.split, o.max_document_bytes, builder);
  else if (o.format == "jsonl") read_jsonl_files(in.files, o.text_field, o.max_document_bytes, builder);
  else if (o.format == "megatron") read_megatron(in.prefixes, plan.identity.vocab_size, builder);
  else if (o.format == "llmc") read_llmc(in.files, plan.identity.vocab_size, plan.identity.eos_id, builder);
  else if (o.format == "npy") read_npy(in.files, plan.identity.vocab_size, plan.identity.eos_id, builder);
  else read_dataset_documents(in.datasets, plan.decoder.get(), builder);
}

// What a finished conversion should tell: an empty validation split, documents run together.
void say_notes(const ConvertOptions& o, const TokenizerPlan& plan, const Manifest& manifest,
               const DatasetBuilder& builder, const Say& say) {
  if (manifest.val.empty() && o.val_fraction > 0 && o.format != "shards")
    say(fmt::format("note: none of the {} documents went to validation; the val split is empty", builder.documents()));
  // Megatron files keep an EOS only when their maker appended one; without it the documents
  // run together in the token stream, which the model cannot tell from one long document.
  if (o.format == "megatron" && o.eos == EosMode::automatic && plan.identity.eos_id >= 0 &&
      builder.documents_without_eos() > 0)
    say(fmt::format("note: {} of the {} documents do not end with the EOS id {}, and --eos auto keeps the ids as "
                    "they are, so those documents run into the next one; convert again with --eos append to end "
                    "each with EOS (or --eos none to keep them so without this note)",
                    builder.documents_without_eos(), builder.documents(), plan.identity.eos_id));
}

}  // namespace

ConvertReport convert_dataset(const ConvertOptions& options, const std::function<void(const std::string&)>& progress,
                              std::FILE* progress_bar) {
  const auto started = std::chrono::steady_clock::now();
  const Say say = [&](const std::string& line) {
    if (progress) progress(line);
  };
  validate_paths(options);
  ConvertOptions o = options;
  if (o.format.empty()) {
    const DetectedFormat detected = detect_input_format(o.inputs, name_filter(o));
    o.format = detected.format;
    say(fmt::format("input format {}: {} (--format chooses another)", detected.format, detected.reason));
  }
  validate(o);

  // Everything that can be checked before writing is checked here.
  TokenizerPlan plan;
  const ConvertInputs in = find_inputs(o, plan, say);
  if (!plan.eos_note.empty()) say(plan.eos_note);
  const bool append_eos = o.eos == EosMode::append || (o.eos == EosMode::automatic && plan.text_out);
  if (append_eos && plan.identity.eos_id < 0)
    throw UserError(fmt::format("tokenizer {} has no end-of-document id to append: pass {}--eos none",
                                plan.identity.describe(), is_id_format(o.format) ? "its id with --eos-id, or " : ""));

  for (const std::string& line : remove_stale_staging(o.output_dir)) say(line);
  StagedDirectory staging(o.output_dir);
  say(fmt::format("converting {} {} ({:.1f} MB) into {}", in.count(), in.count() == 1 ? "input" : "inputs",
                  static_cast<double>(in.total_bytes) / 1e6, staging.final_path()));
  copy_model(plan, staging.path());
  ProgressOptions progress_options;
  progress_options.label = "convert";
  progress_options.total = in.total_bytes;
  progress_options.unit = ProgressUnit::bytes;
  const auto reporter = progress_bar ? std::make_unique<ProgressReporter>(progress_bar, progress_options)
                                     : std::make_unique<ProgressReporter>(progress, progress_options);
  DatasetBuilder builder(o, staging.path(), plan.encoder.get(), plan.identity, describe_source(o, append_eos),
                         append_eos, reporter.get());
  read_inputs(o, in, plan, builder);

  const Manifest manifest = builder.finish();
  // Last, after every shard is flushed: its presence marks the dataset complete.
  write_manifest((fs::path(staging.path()) / kManifestFileName).string(), manifest);
  staging.commit();
  reporter->finish();
  say_notes(o, plan, manifest, builder, say);

  ConvertReport report;
  report.documents = builder.documents();
  report.train_tokens = builder.tokens(Split::train);
  report.val_tokens = builder.tokens(Split::val);
  report.bytes_read = builder.bytes_read();
  report.shards = static_cast<int>(manifest.train.size() + manifest.val.size());
  report.format = o.format;
  report.tokenizer = plan.identity.describe();
  report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  return report;
}

}  // namespace ustrain
