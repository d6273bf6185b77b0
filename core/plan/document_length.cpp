#include "core/plan/document_length.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>

#include "data/shards/dataset.h"
#include "kernels/error.h"

namespace ustrain {

PlannedDocuments planned_documents(const Recipe& r, std::int64_t given) {
  if (given < 0)
    throw UserError(fmt::format("--document-tokens {}: give the mean document length in tokens (1 or more)", given));
  if (!r.train.document_mask) return {};
  if (given > 0) return {given, fmt::format("documents of {} tokens (--document-tokens)", given)};
  std::error_code ec;
  if (!r.data.path.empty() && std::filesystem::exists(r.data.path, ec)) {
    const TokenDataset data = TokenDataset::open(r.data.path);
    const std::int64_t documents = data.documents(Split::train);
    if (documents > 0) {
      const std::int64_t mean = std::max<std::int64_t>(1, data.tokens(Split::train) / documents);
      return {mean, fmt::format("documents of {} tokens, the mean of the {} training documents of data.path = {} "
                                "(--document-tokens N sets another)",
                                mean, documents, r.data.path)};
    }
  }
  return {0, "each sequence as one document: no dataset at data.path to measure the documents' mean length; give "
             "it with --document-tokens N"};
}

std::vector<std::int32_t> regular_documents(std::int64_t sequences, std::int64_t seq_len,
                                            std::int64_t document_tokens) {
  USTRAIN_ASSERT(sequences >= 0 && seq_len >= 0 && document_tokens >= 0, "bad document layout");
  std::vector<std::int32_t> ids(static_cast<std::size_t>(sequences * seq_len), 0);
  if (document_tokens == 0) return ids;
  for (std::int64_t b = 0; b < sequences; ++b)
    for (std::int64_t t = 0; t < seq_len; ++t)
      ids[static_cast<std::size_t>(b * seq_len + t)] = static_cast<std::int32_t>(t / document_tokens);
  return ids;
}

}  // namespace ustrain
