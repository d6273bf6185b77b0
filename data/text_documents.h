// Text inputs: plain text files cut into documents (data/document_splitter.h), and JSONL files
// with one JSON object per line whose `text_field` holds a document. Either may be gzip- or
// zstd-compressed (data/compressed_input.h); progress counts the files' bytes as stored.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "data/document_sink.h"
#include "data/document_splitter.h"
#include "data/input_files.h"

namespace ustrain {

// UserError naming the file, the document's number and its first line for a document longer
// than `max_document_bytes` (data/document_splitter.h).
void read_text_files(const std::vector<InputFile>& files, const std::string& split_mode,
                     std::int64_t max_document_bytes, DocumentSink& sink);

// Blank lines are skipped; documents of only whitespace are dropped. UserError naming the file
// and line for a line that is not a JSON object, or lacks `text_field`, or whose value is not
// a string, or that is longer than `max_document_bytes`.
void read_jsonl_files(const std::vector<InputFile>& files, const std::string& text_field,
                      std::int64_t max_document_bytes, DocumentSink& sink);

}  // namespace ustrain
