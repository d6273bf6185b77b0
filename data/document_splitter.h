// Cuts the bytes of text files into documents. Modes:
//   "file"          each file is one document;
//   "blank-line"    documents are separated by one or more blank lines (only spaces, tabs, CR);
//   "line:<MARKER>" a line equal to MARKER separates documents ("line:%" for fortune files).
// A document keeps its bytes exactly, line ends included; separator lines belong to no document.
// A line's trailing CR is ignored when comparing it with MARKER, so CRLF files work.
// Documents never span files, and documents of only whitespace are dropped.
#pragma once

#include <functional>
#include <string>
#include <string_view>

namespace ustrain {

class DocumentSplitter {
 public:
  using Sink = std::function<void(std::string_view document)>;

  // UserError if `mode` is none of the modes above.
  explicit DocumentSplitter(const std::string& mode);

  // The next bytes of the current file; each completed document goes to `sink`.
  void feed(std::string_view bytes, const Sink& sink);
  // Ends the current file, passing its last document to `sink`.
  void end_file(const Sink& sink);

 private:
  enum class Mode { whole_file, blank_line, marker_line };

  void take_line(std::string_view line, const Sink& sink);
  bool is_separator(std::string_view line) const;
  void emit(const Sink& sink);

  Mode mode_ = Mode::whole_file;
  std::string marker_;
  std::string document_;      // the document being collected
  std::string partial_line_;  // the start of a line whose end has not been fed yet
};

}  // namespace ustrain
