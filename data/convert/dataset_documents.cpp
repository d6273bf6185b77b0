#include "data/convert/dataset_documents.h"

#include <algorithm>

#include <fmt/format.h>

#include "data/shards/shard_file.h"
#include "data/inputs/token_ids.h"
#include "kernels/error.h"

namespace ustrain {
namespace {

// Collects whole documents, then decodes each into text for the sink.
class Retokenizer {
 public:
  Retokenizer(const Tokenizer& tokenizer, DocumentSink& sink) : tokenizer_(tokenizer), sink_(sink) {}
  void append(std::span<const std::int32_t> ids) { document_.insert(document_.end(), ids.begin(), ids.end()); }
  // Documents are numbered per dataset split, for messages.
  void start_split(const TokenDataset& dataset, Split split) {
    source_ = std::make_shared<const std::string>(fmt::format("{} ({} split)", dataset.dir(), split_name(split)));
    number_ = 0;
  }
  void end_document(Split split) {
    std::span<const std::int32_t> ids = document_;
    // The old EOS goes; the new tokenizer's is appended when the text is encoded.
    const std::int32_t eos = tokenizer_.eos_id();
    while (!ids.empty() && ids.back() == eos) ids = ids.first(ids.size() - 1);
    while (!ids.empty() && ids.front() == eos) ids = ids.subspan(1);
    if (!document_.empty()) ++number_;
    if (!ids.empty()) sink_.add_text(tokenizer_.decode(ids), split, {source_, number_, 0});
    document_.clear();
  }

 private:
  const Tokenizer& tokenizer_;
  DocumentSink& sink_;
  std::vector<std::int32_t> document_;
  std::shared_ptr<const std::string> source_;
  std::int64_t number_ = 0;
};

}  // namespace

void read_dataset_documents(const std::vector<TokenDataset>& datasets, const Tokenizer* decode_with,
                            DocumentSink& sink) {
  DocumentPieces pieces(sink);
  std::optional<Retokenizer> retokenizer;
  if (decode_with) retokenizer.emplace(*decode_with, sink);
  for (const TokenDataset& dataset : datasets) {
    for (Split split : {Split::train, Split::val}) {
      pieces.set_split(split);
      if (retokenizer) retokenizer->start_split(dataset, split);
      const auto end_document = [&] {
        if (retokenizer) retokenizer->end_document(split);
        else pieces.end_document();
      };
      const auto append = [&](std::span<const std::int32_t> ids) {
        if (retokenizer) retokenizer->append(ids);
        else pieces.append(ids);
      };
      for (const ShardInfo& shard : dataset.shards(split)) {
        const std::vector<std::int32_t> tokens = dataset.read_shard(shard);
        const std::vector<std::uint64_t> offsets = read_shard_doc_offsets(dataset.shard_path(shard));
        if (offsets.empty() || offsets.back() != tokens.size() || !std::is_sorted(offsets.begin(), offsets.end()))
          throw UserError(fmt::format("shard {}: /doc_offsets does not run up to the token count; the file is "
                                      "damaged: re-copy the dataset or convert it again",
                                      dataset.shard_path(shard)));
        // Tokens before the first offset continue the previous shard's last document.
        std::uint64_t begin = 0;
        for (std::size_t i = 0; i + 1 < offsets.size(); ++i) {
          append(std::span<const std::int32_t>(tokens).subspan(begin, offsets[i] - begin));
          end_document();
          begin = offsets[i];
        }
        append(std::span<const std::int32_t>(tokens).subspan(begin));
        sink.advance(static_cast<std::int64_t>(shard.bytes));
      }
      end_document();
    }
  }
}

}  // namespace ustrain
