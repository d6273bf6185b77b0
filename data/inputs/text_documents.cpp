#include "data/inputs/text_documents.h"

#include <algorithm>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "data/inputs/compressed_input.h"
#include "data/inputs/document_splitter.h"
#include "data/files/json_input.h"
#include "kernels/error.h"

namespace ustrain {
namespace {

constexpr std::size_t kReadChunk = 1 << 20;

// Progress counts the bytes of the files (compressed bytes for compressed files), whose total
// is known before reading starts.
void advance_to(std::int64_t file_bytes, std::int64_t& reported, DocumentSink& sink) {
  if (file_bytes > reported) sink.advance(file_bytes - reported);
  reported = file_bytes;
}

bool only_whitespace(const std::string& text) {
  return std::all_of(text.begin(), text.end(), [](char c) {
    return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\f' || c == '\v';
  });
}

void refuse_long_line(const InputFile& input, std::int64_t number, std::int64_t max_line_bytes) {
  throw UserError(fmt::format("{}:{}: the line is longer than the maximum document size, {} (is the file JSONL, one "
                              "object per line?); split the document, or raise --max-document-mib",
                              input.path, number, describe_document_limit(max_line_bytes)));
}

// Calls `on_line(line, number)` for each line of the file (without its '\n'); UserError for a
// line longer than `max_line_bytes`, before more of it is read.
template <class OnLine>
void for_each_line(const InputFile& input, std::int64_t max_line_bytes, DocumentSink& sink, OnLine on_line) {
  InputReader reader(input.path);
  std::vector<char> buffer(kReadChunk);
  std::string line;
  std::int64_t number = 0;
  std::int64_t reported = 0;
  const auto append = [&](std::string_view bytes) {
    if (static_cast<std::int64_t>(line.size() + bytes.size()) > max_line_bytes)
      refuse_long_line(input, number + 1, max_line_bytes);
    line.append(bytes);
  };
  while (std::size_t got = reader.read(buffer.data(), buffer.size())) {
    std::string_view bytes(buffer.data(), got);
    for (std::size_t newline; (newline = bytes.find('\n')) != std::string_view::npos;) {
      append(bytes.substr(0, newline));
      bytes.remove_prefix(newline + 1);
      on_line(line, ++number);
      line.clear();
    }
    append(bytes);
    advance_to(reader.file_bytes_read(), reported, sink);
  }
  advance_to(reader.file_bytes_read(), reported, sink);
  if (!line.empty()) on_line(line, ++number);
}

}  // namespace

void read_text_files(const std::vector<InputFile>& files, const std::string& split_mode,
                     std::int64_t max_document_bytes, DocumentSink& sink) {
  DocumentSplitter splitter(split_mode, max_document_bytes);
  std::shared_ptr<const std::string> path;  // the file being read, for messages about its documents
  const DocumentSplitter::Sink on_document = [&](std::string_view document, std::int64_t number, std::int64_t line) {
    sink.add_text(std::string(document), std::nullopt, {path, number, line});
  };
  std::vector<char> buffer(kReadChunk);
  for (const InputFile& input : files) {
    path = std::make_shared<const std::string>(input.path);
    InputReader reader(input.path);
    splitter.begin_file(input.path);
    std::int64_t reported = 0;
    while (std::size_t got = reader.read(buffer.data(), buffer.size())) {
      splitter.feed(std::string_view(buffer.data(), got), on_document);
      advance_to(reader.file_bytes_read(), reported, sink);
    }
    advance_to(reader.file_bytes_read(), reported, sink);
    splitter.end_file(on_document);
  }
}

void read_jsonl_files(const std::vector<InputFile>& files, const std::string& text_field,
                      std::int64_t max_document_bytes, DocumentSink& sink) {
  for (const InputFile& input : files) {
    const auto path = std::make_shared<const std::string>(input.path);
    for_each_line(input, max_document_bytes, sink, [&](const std::string& line, std::int64_t number) {
      if (only_whitespace(line)) return;
      const auto where = [&] { return fmt::format("{}:{}", input.path, number); };
      nlohmann::json object;
      try {
        object = parse_json(line, where());
      } catch (const nlohmann::json::exception& error) {  // parse_error, or out_of_range for a number beyond a double
        throw UserError(fmt::format("{}: not valid JSON ({}); each line of a JSONL file must be one JSON "
                                    "object",
                                    where(), error.what()));
      }
      if (!object.is_object())
        throw UserError(fmt::format("{}: the line is JSON but not an object; each line must be an object "
                                    "like {{\"{}\": \"...\"}}",
                                    where(), text_field));
      const auto field = object.find(text_field);
      if (field == object.end())
        throw UserError(fmt::format("{}: the object has no field \"{}\"; name the field that holds the text "
                                    "with --text-field",
                                    where(), text_field));
      if (!field->is_string())
        throw UserError(fmt::format("{}: field \"{}\" is not a string", where(), text_field));
      std::string text = field->get<std::string>();
      if (!only_whitespace(text)) sink.add_text(std::move(text), std::nullopt, {path, 0, number});
    });
  }
}

}  // namespace ustrain
