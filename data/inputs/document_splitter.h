// Cuts the bytes of text files into documents. Modes:
//   "file"          each file is one document;
//   "blank-line"    documents are separated by one or more blank lines (only spaces, tabs, CR);
//   "line:<MARKER>" a line equal to MARKER separates documents ("line:%" for fortune files).
// A document keeps its bytes exactly, line ends included; separator lines belong to no document.
// A line's trailing CR is ignored when comparing it with MARKER, so CRLF files work.
// Documents never span files, and documents of only whitespace are dropped.
// A document is held whole until it ends, so its size is capped: one that grows past
// `max_document_bytes` (lines and all) is a UserError naming the file, the document's number
// in it and its first line, before more of it is read.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

namespace ustrain {

// A document (a JSONL line) is held whole while it is read and tokenized, so its size is
// capped; far above real documents (the longest books run to a few MiB), the cap stops a file
// without separators, or a decompression bomb, from taking all memory.
inline constexpr std::int64_t kDefaultMaxDocumentBytes = std::int64_t{64} << 20;

// "64 MiB", or "100 bytes" for a size that is not a whole number of MiB.
std::string describe_document_limit(std::int64_t bytes);

class DocumentSplitter {
 public:
  // A document, its number in the file (from 1) and its first line.
  using Sink = std::function<void(std::string_view document, std::int64_t number, std::int64_t first_line)>;

  // UserError if `mode` is none of the modes above.
  DocumentSplitter(const std::string& mode, std::int64_t max_document_bytes);

  // Starts a file, named `path` in messages.
  void begin_file(std::string path);
  // The next bytes of the current file; each completed document goes to `sink`.
  void feed(std::string_view bytes, const Sink& sink);
  // Ends the current file, passing its last document to `sink`.
  void end_file(const Sink& sink);

 private:
  enum class Mode { whole_file, blank_line, marker_line };

  void take_line(std::string_view line, const Sink& sink);
  bool is_separator(std::string_view line) const;
  void emit(const Sink& sink);
  // UserError when the document, with `unfinished_line` bytes of a line still to come, is too long.
  void check_size(std::size_t unfinished_line) const;

  Mode mode_ = Mode::whole_file;
  std::string marker_;
  std::int64_t max_document_bytes_;
  std::string path_;
  std::string document_;      // the document being collected
  std::string partial_line_;  // the start of a line whose end has not been fed yet
  std::int64_t lines_ = 0;          // whole lines of the file taken so far
  std::int64_t documents_ = 0;      // documents of the file emitted so far
  std::int64_t document_line_ = 1;  // the line the document being collected starts on
};

}  // namespace ustrain
