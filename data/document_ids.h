// Document ids of a packed window, for document masking (kernels/attention_mask.h): a
// document ends with the end-of-document token, inclusive, and the next token starts the next
// one. Token t's id is the number of end-of-document tokens among the window's tokens before
// it, so the ids are a pure function of the window's own tokens: the same whatever was read
// before, and the same for every part of the window whichever process numbers it.
#pragma once

#include <cstdint>
#include <span>

namespace ustrain {

// documents[t] for each token t of `window` (documents.size() == window.size()).
void number_documents(std::span<const std::int32_t> window, std::int32_t end_of_document,
                      std::span<std::int32_t> documents);

}  // namespace ustrain
