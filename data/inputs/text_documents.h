// Text inputs: plain text files cut into documents (data/inputs/document_splitter.h), and JSONL files
// with one JSON object per line whose `text_field` holds a document. Either may be gzip- or
// zstd-compressed (data/inputs/compressed_input.h); progress counts the files' bytes as stored.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "data/inputs/document_sink.h"
#include "data/inputs/document_splitter.h"
#include "data/inputs/input_files.h"

namespace ustrain {

// UserError naming the file, the document's number and its first line for a document longer
// than `max_document_bytes` (data/inputs/document_splitter.h).
void read_text_files(const std::vector<InputFile>& files, const std::string& split_mode,
                     std::int64_t max_document_bytes, DocumentSink& sink);

// Blank lines are skipped; documents of only whitespace are dropped. UserError naming the file
// and line for a line that is not a JSON object, or lacks `text_field`, or whose value is not
// a string, or that is longer than `max_document_bytes`.
void read_jsonl_files(const std::vector<InputFile>& files, const std::string& text_field,
                      std::int64_t max_document_bytes, DocumentSink& sink);

}  // namespace ustrain
