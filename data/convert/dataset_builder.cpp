#include "data/convert/dataset_builder.h"

#include <fmt/format.h>

#include "data/files/portable_random.h"
#include "kernels/error.h"

namespace ustrain {
namespace {

ShardHeader header_for(const TokenizerIdentity& identity, const std::string& source) {
  ShardHeader header;
  header.tokenizer = identity;
  header.source = source;
  return header;
}

}  // namespace

DatasetBuilder::DatasetBuilder(const ConvertOptions& options, const std::string& dir, const Tokenizer* tokenizer,
                               TokenizerIdentity identity, std::string source, bool append_eos,
                               ProgressReporter* reporter)
    : options_(options), identity_(std::move(identity)), source_(std::move(source)), append_eos_(append_eos),
      reporter_(reporter),
      train_(dir, Split::train, header_for(identity_, source_), options.shard_tokens, {options.compression}),
      val_(dir, Split::val, header_for(identity_, source_), options.shard_tokens, {options.compression}),
      // Byte "encoding" is a copy, cheaper than handing documents to a thread and back.
      encoder_(tokenizer, tokenizer && tokenizer->identity() == "byte" ? 1 : options.workers,
               [this](PendingDocument& document) { accept(document); }) {
  USTRAIN_ASSERT(!append_eos_ || identity_.eos_id >= 0, "appending EOS needs an EOS id");
}

void DatasetBuilder::add_text(std::string text, std::optional<Split> split, DocumentOrigin origin) {
  PendingDocument document;
  document.text = std::move(text);
  document.origin = std::move(origin);
  document.encode = true;
  document.split = split;
  encoder_.add(std::move(document));
}

void DatasetBuilder::add_tokens(std::span<const std::int32_t> ids, bool starts, bool ends, std::optional<Split> split) {
  PendingDocument document;
  document.ids.assign(ids.begin(), ids.end());
  document.starts = starts;
  document.ends = ends;
  document.split = split;
  encoder_.add(std::move(document));
}

void DatasetBuilder::advance(std::int64_t bytes) {
  bytes_read_ += bytes;
  if (reporter_) reporter_->advance(bytes);
}

void DatasetBuilder::accept(PendingDocument& document) {
  const std::vector<std::int32_t>& ids = document.ids;
  if (document.starts) {
    if (ids.empty() && document.ends) return;  // e.g. text that tokenizes to nothing
    std::optional<Split> split = document.split;
    if (!split) {
      SplitMix64 draw(SplitMix64::derive(options_.seed, static_cast<std::uint64_t>(documents_)));
      split = draw.unit() < options_.val_fraction ? Split::val : Split::train;
    }
    current_ = *split == Split::train ? &train_ : &val_;
    current_->add_document(ids);
    ++documents_;
    last_id_ = -1;
  } else {
    USTRAIN_ASSERT(current_ != nullptr, "a document piece without its start");
    current_->extend_document(ids);
  }
  if (!ids.empty()) last_id_ = ids.back();
  if (document.ends && identity_.eos_id >= 0 && last_id_ != identity_.eos_id) ++documents_without_eos_;
  if (document.ends && append_eos_ && last_id_ != identity_.eos_id) {
    const std::int32_t eos = identity_.eos_id;
    current_->extend_document(std::span<const std::int32_t>(&eos, 1));
  }
}

Manifest DatasetBuilder::finish() {
  encoder_.finish();
  if (documents_ == 0)
    throw UserError("found no documents in the inputs: they are empty or hold only whitespace; check the "
                    "input paths, --format and --split");
  if (train_.tokens() == 0)
    throw UserError(fmt::format("all {} documents went to validation: lower --val-fraction ({}) or convert "
                                "more data",
                                documents_, options_.val_fraction));
  Manifest manifest;
  manifest.tokenizer = identity_;
  manifest.token_dtype = shard_tokens_are_16_bit(identity_.vocab_size) ? "uint16" : "uint32";
  manifest.compression = options_.compression > 0 ? fmt::format("deflate:{}", options_.compression) : "none";
  manifest.source = source_;
  manifest.train = train_.finish();
  manifest.val = val_.finish();
  return manifest;
}

}  // namespace ustrain
