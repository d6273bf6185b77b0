#include "data/inputs/input_format.h"

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "data/inputs/compressed_input.h"
#include "data/files/json_input.h"
#include "data/shards/manifest.h"
#include "data/files/path_status.h"
#include "data/inputs/text_check.h"
#include "kernels/error.h"

namespace ustrain {
namespace fs = std::filesystem;

namespace {

// A verdict on one input; an empty format means it cannot be told, and `reason` says why.
struct Verdict {
  std::string format;
  std::string reason;
  bool format_helps = true;  // whether naming the format with --format could read the input
};

constexpr char kMegatronMagic[9] = {'M', 'M', 'I', 'D', 'I', 'D', 'X', '\0', '\0'};
constexpr char kNpyMagic[6] = {'\x93', 'N', 'U', 'M', 'P', 'Y'};
constexpr std::size_t kMagicBytes = 16;

std::string head_of(const fs::path& path, std::size_t bytes) {
  std::ifstream in(path, std::ios::binary);
  std::string head(bytes, '\0');
  in.read(head.data(), static_cast<std::streamsize>(bytes));
  head.resize(static_cast<std::size_t>(std::max<std::streamsize>(in.gcount(), 0)));
  return head;
}

bool starts_with(const std::string& head, const char* magic, std::size_t size) {
  return head.size() >= size && std::memcmp(head.data(), magic, size) == 0;
}

// llm.c's header begins with int32 magic and version: 20240520 v1 (uint16), 20240801 v7 (uint32).
std::optional<std::string> llmc_magic(const std::string& head) {
  if (head.size() < 8) return std::nullopt;
  std::int32_t magic = 0, version = 0;
  std::memcpy(&magic, head.data(), 4);  // little-endian, as are our hosts
  std::memcpy(&version, head.data() + 4, 4);
  if (magic == 20240520 && version == 1) return "20240520 (version 1, uint16 tokens)";
  if (magic == 20240801 && version == 7) return "20240801 (version 7, uint32 tokens)";
  return std::nullopt;
}

std::string extension_of(const fs::path& path) {
  std::string extension = path.extension().string();
  std::transform(extension.begin(), extension.end(), extension.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return extension;
}

bool is_one_of(const std::string& extension, std::initializer_list<const char*> extensions) {
  return std::any_of(extensions.begin(), extensions.end(), [&](const char* e) { return extension == e; });
}

bool is_megatron_pair(const fs::path& prefix) {
  const fs::path index = fs::path(prefix.string() + ".idx"), data = fs::path(prefix.string() + ".bin");
  return fs::is_regular_file(index) && fs::is_regular_file(data) &&
         starts_with(head_of(index, kMagicBytes), kMegatronMagic, sizeof kMegatronMagic);
}

// Text whose first non-blank line is a whole JSON object.
bool first_line_is_json_object(const std::string& path) {
  const std::string block = read_content_head(path, kTextCheckBytes);
  const std::size_t start = block.find_first_not_of(" \t\r\n");
  if (start == std::string::npos || block[start] != '{') return false;
  const std::size_t end = block.find('\n', start);
  if (end == std::string::npos && block.size() == kTextCheckBytes) return false;  // the line goes on
  try {
    return parse_json(std::string_view(block).substr(start, end == std::string::npos ? end : end - start), path)
        .is_object();
  } catch (const nlohmann::json::exception&) {  // parse_error, or out_of_range for a number beyond a double
    return false;
  }
}

// Token files are read in place (memory maps, seeks), so only text formats are read compressed.
Verdict detect_compressed(const fs::path& path, Compression compression) {
  const std::string shown = path.string();
  const fs::path named = without_compression_suffix(shown);
  if (is_one_of(extension_of(named), {".npy", ".bin", ".idx"}))
    return {"",
            fmt::format("{} is {}-compressed token data, which ustrain does not read compressed (only text and "
                        "JSONL); decompress it first",
                        shown, compression_name(compression)),
            false};
  return {};
}

Verdict detect_file(const fs::path& path) {
  const std::string shown = path.string();
  const fs::path prefix = fs::path(path).replace_extension();
  if (is_one_of(extension_of(path), {".idx", ".bin"}) && is_megatron_pair(prefix))  // raw tokens may start like gzip
    return {"megatron", fmt::format("{}.idx and {}.bin form a Megatron indexed dataset", prefix.string(),
                                    prefix.string())};
  const Compression compression = compression_of(shown);
  // The format inside is told by the name without .gz / .zst, or by the content once decompressed.
  const fs::path named = without_compression_suffix(shown);
  const std::string extension = extension_of(named);
  const std::string compressed =
      compression == Compression::none ? ""
      : named == path ? fmt::format(", and it is {}-compressed (by its first bytes)", compression_name(compression))
                      : fmt::format(", {}-compressed", compression_name(compression));
  if (compression != Compression::none) {
    if (Verdict refused = detect_compressed(path, compression); !refused.reason.empty()) return refused;
  } else {
    const std::string head = head_of(path, kMagicBytes);
    if (starts_with(head, kMegatronMagic, sizeof kMegatronMagic))
      return {"megatron", fmt::format("{} starts with the Megatron index magic MMIDIDX", shown)};
    if (starts_with(head, kNpyMagic, sizeof kNpyMagic))
      return {"npy", fmt::format("{} starts with the NumPy magic \\x93NUMPY", shown)};
    if (const auto magic = llmc_magic(head))
      return {"llmc", fmt::format("{} starts with the llm.c shard magic {}", shown, *magic)};
  }
  if (is_one_of(extension, {".jsonl", ".json", ".ndjson"}))
    return {"jsonl", fmt::format("{} ends in {}{}", named.string(), extension, compressed)};
  if (extension == ".npy") return {"npy", fmt::format("{} ends in .npy", shown)};
  if (is_one_of(extension, {".txt", ".text", ".md", ".markdown", ".rst", ".tex", ".org", ".adoc"}))
    return {"text", fmt::format("{} ends in {}{}", named.string(), extension, compressed)};
  if (extension == ".bin")
    return {"", fmt::format("{} is neither an llm.c shard (its header lacks the magic 20240520 or 20240801) nor "
                            "the .bin of a Megatron dataset (no {}.idx beside it)",
                            shown, prefix.string())};
  if (extension == ".idx") return {"", fmt::format("{} does not start with the Megatron index magic MMIDIDX", shown)};
  const TextVerdict text = check_text_file(shown);
  if (compression != Compression::none && text != TextVerdict::text)
    return {"",
            fmt::format("{} is {}-compressed, and what it holds is not text ({}): ustrain reads text and JSONL "
                        "compressed, not archives or token files; unpack it and convert what is inside",
                        shown, compression_name(compression),
                        text == TextVerdict::nul_byte ? "a NUL byte" : "not valid UTF-8"),
            false};
  if (text == TextVerdict::nul_byte)
    return {"", fmt::format("{} has no extension ustrain knows and is not text (a NUL byte in its first {} KiB)", shown,
                            kTextCheckBytes / 1024)};
  if (text == TextVerdict::invalid_utf8)
    return {"", fmt::format("{} has no extension ustrain knows and is not UTF-8 text", shown)};
  if (first_line_is_json_object(shown))
    return {"jsonl", fmt::format("the first line of {} is a JSON object{}", shown, compressed)};
  return {"text", fmt::format("{} has no extension ustrain knows and is UTF-8 text{}", shown, compressed)};
}

// The format a file lends the directory it is in: only the files the format readers take
// from directories count; everything else is "" (read as text when nothing else is there).
std::string format_in_directory(const fs::path& path) {
  const std::string extension = extension_of(path);
  if (extension_of(without_compression_suffix(path.string())) == ".jsonl") return "jsonl";  // also .jsonl.gz, .zst
  if (extension == ".npy") return "npy";
  if (extension == ".idx")
    return starts_with(head_of(path, kMagicBytes), kMegatronMagic, sizeof kMegatronMagic) ? "megatron" : "";
  if (extension == ".bin") {
    if (is_megatron_pair(fs::path(path).replace_extension())) return "megatron-data";  // counted with its .idx
    return llmc_magic(head_of(path, kMagicBytes)) ? "llmc" : "";
  }
  return "";
}

std::string kind_of_files(const std::string& format, std::size_t count) {
  const bool one = count == 1;
  if (format == "jsonl") return one ? ".jsonl file" : ".jsonl files";
  if (format == "npy") return one ? ".npy array" : ".npy arrays";
  if (format == "megatron") return one ? "Megatron dataset (.idx/.bin)" : "Megatron datasets (.idx/.bin)";
  return one ? "llm.c shard" : "llm.c shards";
}

// Text and JSONL are both text: which one a file holds is a guess that one conversion should
// not make file by file, so a mix is refused (in a directory as on the command line) with this way out.
constexpr const char* kTextBesideJsonlFix =
    "one conversion reads one format: --include '*.jsonl*' reads only the JSONL files (a dataset card such as "
    "README.md is not training data), --format text --exclude '*.jsonl*' only the text files";

// The first file (in sorted order) that the text format would read, or "".
std::string first_text_file(const std::vector<std::string>& files) {
  for (const std::string& file : files)
    if (check_text_file(file) == TextVerdict::text) return file;
  return "";
}

Verdict detect_directory(const std::string& dir, const NameFilter& filter) {
  if (fs::is_regular_file(fs::path(dir) / kManifestFileName))
    return {"shards", fmt::format("{} holds {}: a ustrain dataset", dir, kManifestFileName)};
  std::map<std::string, std::vector<std::string>> by_format;  // format -> files (up to an example)
  std::vector<std::string> others;
  for (const InputFile& file : list_input_files({dir}, filter)) {
    const std::string format = format_in_directory(file.path);
    if (format.empty()) others.push_back(file.path);
    else if (format != "megatron-data") by_format[format].push_back(file.path);
  }
  if (by_format.empty())
    return {"text", fmt::format("{} holds no .jsonl, .npy, llm.c or Megatron files, so its files are read as text",
                                dir)};
  if (by_format.size() > 1) {
    std::vector<std::string> kinds;
    for (const auto& [format, files] : by_format)
      kinds.push_back(fmt::format("{} (e.g. {})", kind_of_files(format, files.size()), files.front()));
    return {"", fmt::format("{} holds {}; convert each kind separately (--include selects files by name)", dir,
                            fmt::join(kinds, " and "))};
  }
  const auto& [format, files] = *by_format.begin();
  if (format == "jsonl")
    if (const std::string text = first_text_file(others); !text.empty())
      return {"", fmt::format("{} holds {} {} (e.g. {}) and text files (e.g. {}); {}", dir, files.size(),
                              kind_of_files(format, files.size()), files.front(), text, kTextBesideJsonlFix),
              false};
  return {format, fmt::format("{} holds {} {}{}", dir, files.size(), kind_of_files(format, files.size()),
                              others.empty() ? "" : fmt::format(" (its {} other files are not read)", others.size()))};
}

Verdict detect_input(const std::string& input, const NameFilter& filter) {
  std::error_code error;
  const fs::file_status status = fs::status(input, error);
  if (fs::is_directory(status)) return detect_directory(input, filter);
  if (fs::is_regular_file(status)) return detect_file(input);
  if (!fs::exists(status) && is_megatron_pair(input))  // a Megatron prefix names no file itself
    return {"megatron", fmt::format("{}.idx and {}.bin form a Megatron indexed dataset", input, input)};
  if (const PathStatus why = path_status(input); why.access != PathAccess::exists)
    throw UserError(fmt::format("input {} {}: check the path{}", input, describe_unusable(why),
                                why.access == PathAccess::unreachable ? " and its permissions" : ""));
  throw UserError(fmt::format("input {} is neither a file nor a directory", input));
}

}  // namespace

DetectedFormat detect_input_format(const std::vector<std::string>& inputs, const NameFilter& filter) {
  std::vector<std::pair<std::string, Verdict>> verdicts;
  for (const std::string& input : inputs) {
    // A file the filter refuses is not read, so it has no say either.
    if (fs::is_regular_file(input) && !filter.accepts(input)) continue;
    Verdict verdict = detect_input(input, filter);
    if (verdict.format.empty())
      throw UserError(fmt::format("cannot tell the format of {}: {}{}", input, verdict.reason,
                                  verdict.format_helps ? "; pass --format to name it" : ""));
    verdicts.emplace_back(input, std::move(verdict));
  }
  if (verdicts.empty())
    throw UserError(fmt::format("no input files found in {}{}", fmt::join(inputs, ", "), filter.describe()));
  const auto& [first_input, first] = verdicts.front();
  const auto is_text_kind = [](const std::string& format) { return format == "text" || format == "jsonl"; };
  for (const auto& [input, verdict] : verdicts) {
    if (verdict.format == first.format) continue;
    throw UserError(fmt::format("inputs of different formats: {} is {} ({}), but {} is {} ({}); {}", first_input,
                                first.format, first.reason, input, verdict.format, verdict.reason,
                                is_text_kind(first.format) && is_text_kind(verdict.format)
                                    ? kTextBesideJsonlFix
                                    : "convert them separately, or pass --format to read all of them as one format"));
  }
  DetectedFormat detected{first.format, first.reason};
  if (verdicts.size() > 1)
    detected.reason += fmt::format(", and the {} other inputs are {} too", verdicts.size() - 1, first.format);
  return detected;
}

}  // namespace ustrain
