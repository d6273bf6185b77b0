// Text inputs: plain text files cut into documents (data/document_splitter.h), and JSONL files
// with one JSON object per line whose `text_field` holds a document. Either may be gzip- or
// zstd-compressed (data/compressed_input.h); progress counts the files' bytes as stored.
#pragma once

#include <string>
#include <vector>

#include "data/document_sink.h"
#include "data/input_files.h"

namespace ustrain {

void read_text_files(const std::vector<InputFile>& files, const std::string& split_mode, DocumentSink& sink);

// Blank lines are skipped; documents of only whitespace are dropped. UserError naming the file
// and line for a line that is not a JSON object, or lacks `text_field`, or whose value is not
// a string.
void read_jsonl_files(const std::vector<InputFile>& files, const std::string& text_field, DocumentSink& sink);

}  // namespace ustrain
