#include "data/text_documents.h"

#include <algorithm>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "data/compressed_input.h"
#include "data/document_splitter.h"
#include "data/json_input.h"
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

// Calls `on_line(line, number)` for each line of the file (without its '\n').
template <class OnLine>
void for_each_line(const InputFile& input, DocumentSink& sink, OnLine on_line) {
  InputReader reader(input.path);
  std::vector<char> buffer(kReadChunk);
  std::string line;
  std::int64_t number = 0;
  std::int64_t reported = 0;
  while (std::size_t got = reader.read(buffer.data(), buffer.size())) {
    std::string_view bytes(buffer.data(), got);
    for (std::size_t newline; (newline = bytes.find('\n')) != std::string_view::npos;) {
      line.append(bytes.substr(0, newline));
      bytes.remove_prefix(newline + 1);
      on_line(line, ++number);
      line.clear();
    }
    line.append(bytes);
    advance_to(reader.file_bytes_read(), reported, sink);
  }
  advance_to(reader.file_bytes_read(), reported, sink);
  if (!line.empty()) on_line(line, ++number);
}

}  // namespace

void read_text_files(const std::vector<InputFile>& files, const std::string& split_mode, DocumentSink& sink) {
  DocumentSplitter splitter(split_mode);
  const DocumentSplitter::Sink on_document = [&](std::string_view document) { sink.add_text(std::string(document)); };
  std::vector<char> buffer(kReadChunk);
  for (const InputFile& input : files) {
    InputReader reader(input.path);
    std::int64_t reported = 0;
    while (std::size_t got = reader.read(buffer.data(), buffer.size())) {
      splitter.feed(std::string_view(buffer.data(), got), on_document);
      advance_to(reader.file_bytes_read(), reported, sink);
    }
    advance_to(reader.file_bytes_read(), reported, sink);
    splitter.end_file(on_document);
  }
}

void read_jsonl_files(const std::vector<InputFile>& files, const std::string& text_field, DocumentSink& sink) {
  for (const InputFile& input : files) {
    for_each_line(input, sink, [&](const std::string& line, std::int64_t number) {
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
      if (!only_whitespace(text)) sink.add_text(std::move(text));
    });
  }
}

}  // namespace ustrain
