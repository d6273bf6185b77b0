#include "data/document_ids.h"

#include "kernels/error.h"

namespace ustrain {

void number_documents(std::span<const std::int32_t> window, std::int32_t end_of_document,
                      std::span<std::int32_t> documents) {
  USTRAIN_ASSERT(documents.size() == window.size(), "document ids need one entry per token");
  std::int32_t document = 0;
  for (std::size_t t = 0; t < window.size(); ++t) {
    documents[t] = document;
    if (window[t] == end_of_document) ++document;
  }
}

}  // namespace ustrain
