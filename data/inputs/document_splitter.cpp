#include "data/inputs/document_splitter.h"

#include <algorithm>

#include <fmt/format.h>

#include "kernels/error.h"

namespace ustrain {
namespace {

constexpr std::string_view kMarkerPrefix = "line:";

bool is_blank(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\f' || c == '\v'; }

bool all_blank(std::string_view text) { return std::all_of(text.begin(), text.end(), is_blank); }

}  // namespace

std::string describe_document_limit(std::int64_t bytes) {
  return bytes % (1 << 20) == 0 ? fmt::format("{} MiB", bytes >> 20) : fmt::format("{} bytes", bytes);
}

DocumentSplitter::DocumentSplitter(const std::string& mode, std::int64_t max_document_bytes)
    : max_document_bytes_(max_document_bytes) {
  if (mode == "file") {
    mode_ = Mode::whole_file;
  } else if (mode == "blank-line") {
    mode_ = Mode::blank_line;
  } else if (mode.starts_with(kMarkerPrefix)) {
    mode_ = Mode::marker_line;
    marker_ = mode.substr(kMarkerPrefix.size());
  } else {
    throw UserError(fmt::format(
        "document split mode '{}' is not one of: file, blank-line, line:<MARKER> (e.g. line:%)", mode));
  }
}

void DocumentSplitter::begin_file(std::string path) {
  path_ = std::move(path);
  lines_ = documents_ = 0;
  document_line_ = 1;
}

void DocumentSplitter::feed(std::string_view bytes, const Sink& sink) {
  if (mode_ == Mode::whole_file) {
    document_.append(bytes);
    check_size(0);
    return;
  }
  while (!bytes.empty()) {
    const std::size_t newline = bytes.find('\n');
    if (newline == std::string_view::npos) {
      partial_line_.append(bytes);
      check_size(partial_line_.size());
      return;
    }
    const std::string_view line_end = bytes.substr(0, newline + 1);
    bytes.remove_prefix(newline + 1);
    if (partial_line_.empty()) {
      take_line(line_end, sink);
    } else {
      partial_line_.append(line_end);
      take_line(partial_line_, sink);
      partial_line_.clear();
    }
  }
}

void DocumentSplitter::end_file(const Sink& sink) {
  if (!partial_line_.empty()) {  // the file's last line has no newline
    take_line(partial_line_, sink);
    partial_line_.clear();
  }
  emit(sink);
}

void DocumentSplitter::take_line(std::string_view line, const Sink& sink) {
  ++lines_;
  if (is_separator(line)) {
    emit(sink);
  } else {
    if (document_.empty()) document_line_ = lines_;
    document_.append(line);
    check_size(0);
  }
}

bool DocumentSplitter::is_separator(std::string_view line) const {
  if (mode_ == Mode::blank_line) return all_blank(line);
  if (line.ends_with('\n')) line.remove_suffix(1);
  if (line.ends_with('\r')) line.remove_suffix(1);
  return line == marker_;
}

void DocumentSplitter::emit(const Sink& sink) {
  if (!all_blank(document_)) {
    sink(document_, ++documents_, document_line_);
  }
  document_.clear();
}

void DocumentSplitter::check_size(std::size_t unfinished_line) const {
  if (static_cast<std::int64_t>(document_.size() + unfinished_line) <= max_document_bytes_) return;
  const std::string how = mode_ == Mode::whole_file ? "--split file makes each file one document"
                          : mode_ == Mode::blank_line
                              ? "no blank line separates it from what follows (--split blank-line)"
                              : fmt::format("no line '{}' separates it from what follows (--split line:{})", marker_,
                                            marker_);
  throw UserError(fmt::format("{}: document {} of the file (from line {}) is longer than the maximum document size, "
                              "{}: {}; choose the --split that cuts the file into its documents, or raise "
                              "--max-document-mib",
                              path_, documents_ + 1, document_.empty() ? lines_ + 1 : document_line_,
                              describe_document_limit(max_document_bytes_), how));
}

}  // namespace ustrain
