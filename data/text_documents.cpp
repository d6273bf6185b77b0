#include "data/text_documents.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "data/document_splitter.h"
#include "kernels/error.h"

namespace ustrain {
namespace {

constexpr std::size_t kReadChunk = 1 << 20;

using File = std::unique_ptr<std::FILE, int (*)(std::FILE*)>;

File open_input(const InputFile& input) {
  File file(std::fopen(input.path.c_str(), "rb"), &std::fclose);
  if (!file)
    throw UserError(fmt::format("cannot read input file {}: {} (was it moved or changed during "
                                "the conversion?)",
                                input.path, std::strerror(errno)));
  return file;
}

void check_read(std::FILE* file, const InputFile& input) {
  if (std::ferror(file))
    throw UserError(fmt::format("error while reading input file {}: {}", input.path, std::strerror(errno)));
}

bool only_whitespace(const std::string& text) {
  return std::all_of(text.begin(), text.end(), [](char c) {
    return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\f' || c == '\v';
  });
}

// Calls `on_line(line, number)` for each line of the file (without its '\n').
template <class OnLine>
void for_each_line(const InputFile& input, DocumentSink& sink, OnLine on_line) {
  File file = open_input(input);
  std::vector<char> buffer(kReadChunk);
  std::string line;
  std::int64_t number = 0;
  while (std::size_t got = std::fread(buffer.data(), 1, buffer.size(), file.get())) {
    std::string_view bytes(buffer.data(), got);
    for (std::size_t newline; (newline = bytes.find('\n')) != std::string_view::npos;) {
      line.append(bytes.substr(0, newline));
      bytes.remove_prefix(newline + 1);
      on_line(line, ++number);
      line.clear();
    }
    line.append(bytes);
    sink.advance(static_cast<std::int64_t>(got));
  }
  check_read(file.get(), input);
  if (!line.empty()) on_line(line, ++number);
}

}  // namespace

void read_text_files(const std::vector<InputFile>& files, const std::string& split_mode, DocumentSink& sink) {
  DocumentSplitter splitter(split_mode);
  const DocumentSplitter::Sink on_document = [&](std::string_view document) { sink.add_text(std::string(document)); };
  std::vector<char> buffer(kReadChunk);
  for (const InputFile& input : files) {
    File file = open_input(input);
    while (std::size_t got = std::fread(buffer.data(), 1, buffer.size(), file.get())) {
      splitter.feed(std::string_view(buffer.data(), got), on_document);
      sink.advance(static_cast<std::int64_t>(got));
    }
    check_read(file.get(), input);
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
        object = nlohmann::json::parse(line);
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
