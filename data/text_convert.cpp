#include "data/text_convert.h"

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "data/byte_tokenizer.h"
#include "data/document_splitter.h"
#include "data/durable_output.h"
#include "data/input_files.h"
#include "data/manifest.h"
#include "data/portable_random.h"
#include "data/progress.h"
#include "data/shard_writer.h"
#include "kernels/error.h"

namespace ustrain {
namespace {

constexpr std::size_t kReadChunk = 1 << 20;

void validate(const TextConvertOptions& options) {
  if (options.inputs.empty()) throw UserError("no inputs given: name the text files or directories to convert");
  if (options.output_dir.empty()) throw UserError("no output directory given for the converted dataset");
  if (!(options.val_fraction >= 0 && options.val_fraction < 1))
    throw UserError(fmt::format("val_fraction {} is outside [0, 1): it is the share of documents "
                                "held out for validation, e.g. 0.05",
                                options.val_fraction));
  if (options.shard_tokens <= 0)
    throw UserError(fmt::format("shard_tokens {} must be positive", options.shard_tokens));
}

std::string describe_source(const TextConvertOptions& options) {
  return fmt::format("text files {} (split {}, val_fraction {}, seed {}, eos {}{})",
                     fmt::join(options.inputs, ", "), options.split, options.val_fraction,
                     options.seed, options.eos ? "on" : "off",
                     options.exclude.empty() ? "" : fmt::format(", exclude {}", fmt::join(options.exclude, " ")));
}

// Feeds one file to the splitter in chunks; returns the bytes read.
std::uint64_t read_file(const InputFile& input, DocumentSplitter& splitter,
                        const DocumentSplitter::Sink& on_document, ProgressReporter& reporter,
                        std::vector<char>& buffer) {
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> file(std::fopen(input.path.c_str(), "rb"), &std::fclose);
  if (!file)
    throw UserError(fmt::format("cannot read input file {}: {} (was it moved or changed during "
                                "the conversion?)",
                                input.path, std::strerror(errno)));
  std::uint64_t bytes = 0;
  while (std::size_t got = std::fread(buffer.data(), 1, buffer.size(), file.get())) {
    splitter.feed(std::string_view(buffer.data(), got), on_document);
    bytes += got;
    reporter.advance(static_cast<std::int64_t>(got));
  }
  if (std::ferror(file.get()))
    throw UserError(fmt::format("error while reading input file {}: {}", input.path, std::strerror(errno)));
  splitter.end_file(on_document);
  return bytes;
}

}  // namespace

ConvertReport convert_text(const TextConvertOptions& options,
                           const std::function<void(const std::string&)>& progress) {
  const auto started = std::chrono::steady_clock::now();
  validate(options);
  DocumentSplitter splitter(options.split);
  const std::vector<InputFile> inputs = list_input_files(options.inputs, options.exclude);
  if (inputs.empty())
    throw UserError(fmt::format("no input files found in {}{}", fmt::join(options.inputs, ", "),
                                options.exclude.empty()
                                    ? ""
                                    : fmt::format(" after excluding {}", fmt::join(options.exclude, " "))));
  std::int64_t total_bytes = 0;
  for (const InputFile& input : inputs) total_bytes += static_cast<std::int64_t>(input.bytes);

  StagedDirectory staging(options.output_dir);
  const auto say = [&](const std::string& line) {
    if (progress) progress(line);
  };
  say(fmt::format("converting {} files ({:.1f} MB) into {}", inputs.size(), total_bytes / 1e6,
                  staging.final_path()));

  const ByteTokenizer tokenizer;
  ShardHeader header;
  header.tokenizer = tokenizer.identity();
  header.vocab_size = ByteTokenizer::kVocabSize;
  header.eos_id = ByteTokenizer::kEos;
  header.source = describe_source(options);
  ShardWriter train(staging.path(), Split::train, header, options.shard_tokens);
  ShardWriter val(staging.path(), Split::val, header, options.shard_tokens);

  ProgressOptions progress_options;
  progress_options.label = "convert";
  progress_options.total = total_bytes;
  progress_options.unit = ProgressUnit::bytes;
  ProgressReporter reporter(progress, progress_options);

  std::int64_t documents = 0;
  std::vector<std::int32_t> ids;
  const DocumentSplitter::Sink on_document = [&](std::string_view document) {
    ids = tokenizer.encode(document);
    if (options.eos) ids.push_back(ByteTokenizer::kEos);
    SplitMix64 draw(SplitMix64::derive(options.seed, static_cast<std::uint64_t>(documents)));
    (draw.unit() < options.val_fraction ? val : train).add_document(ids);
    ++documents;
  };

  ConvertReport report;
  std::vector<char> buffer(kReadChunk);
  for (const InputFile& input : inputs)
    report.bytes_read += static_cast<std::int64_t>(read_file(input, splitter, on_document, reporter, buffer));

  if (documents == 0)
    throw UserError(fmt::format("found no documents in the {} input files: they are empty or hold "
                                "only whitespace (split mode {})",
                                inputs.size(), options.split));
  if (train.tokens() == 0)
    throw UserError(fmt::format("all {} documents went to validation: lower val_fraction ({}) or "
                                "convert more text",
                                documents, options.val_fraction));
  if (val.documents() == 0 && options.val_fraction > 0)
    say(fmt::format("note: none of the {} documents went to validation; the val split is empty", documents));

  Manifest manifest;
  manifest.tokenizer = header.tokenizer;
  manifest.vocab_size = header.vocab_size;
  manifest.eos_id = header.eos_id;
  manifest.token_dtype = shard_tokens_are_16_bit(header.vocab_size) ? "uint16" : "uint32";
  manifest.source = header.source;
  manifest.train = train.finish();
  manifest.val = val.finish();
  // Last, after every shard is flushed: its presence marks the dataset complete.
  write_manifest(staging.path() + "/" + kManifestFileName, manifest);
  staging.commit();
  reporter.finish();

  report.documents = documents;
  report.train_tokens = train.tokens();
  report.val_tokens = val.tokens();
  report.shards = static_cast<int>(manifest.train.size() + manifest.val.size());
  report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  say(fmt::format("wrote {} documents: {} train tokens, {} val tokens in {} shards to {} ({:.1f} MB/s)",
                  report.documents, report.train_tokens, report.val_tokens, report.shards,
                  staging.final_path(), report.seconds > 0 ? report.bytes_read / 1e6 / report.seconds : 0.0));
  return report;
}

}  // namespace ustrain
