#include "data/shards/manifest.h"

#include <algorithm>
#include <filesystem>
#include <iterator>
#include <fstream>
#include <limits>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "data/files/durable_output.h"
#include "data/files/json_input.h"
#include "data/files/path_status.h"
#include "data/files/regular_file.h"
#include "kernels/error.h"

namespace ustrain {
namespace {

using nlohmann::json;

// Reads fields with a message that names the manifest and the field.
class FieldReader {
 public:
  explicit FieldReader(const std::string& path) : path_(path) {}

  [[noreturn]] void fail(const std::string& field, const std::string& problem) const {
    throw UserError(fmt::format("{}: {} {}; the manifest is damaged: convert the dataset again",
                                path_, field, problem));
  }

  const json& member(const json& object, const std::string& field, const char* key) const {
    if (!object.is_object() || !object.contains(key)) fail(field, "is missing");
    return object.at(key);
  }

  std::int64_t integer(const json& object, const std::string& field, const char* key) const {
    const json& value = member(object, field, key);
    if (!value.is_number_integer()) fail(field, "is not an integer");
    return value.get<std::int64_t>();
  }

  std::int64_t count(const json& object, const std::string& field, const char* key) const {
    const std::int64_t value = integer(object, field, key);
    if (value < 0) fail(field, "is negative");
    return value;
  }

  std::string text(const json& object, const std::string& field, const char* key) const {
    const json& value = member(object, field, key);
    if (!value.is_string()) fail(field, "is not a string");
    return value.get<std::string>();
  }

 private:
  const std::string& path_;
};

bool is_plain_file_name(const std::string& name) {
  return !name.empty() && name.find('/') == std::string::npos && name != "." && name != "..";
}

json shard_to_json(const ShardInfo& shard) {
  return {{"file", shard.file},
          {"tokens", shard.tokens},
          {"documents", shard.documents},
          {"bytes", shard.bytes},
          {"checksum", shard.checksum}};
}

std::vector<ShardInfo> shards_from_json(const FieldReader& reader, const json& splits, Split split) {
  const std::string field = fmt::format("splits.{}", split_name(split));
  const json& list = reader.member(splits, field, split_name(split));
  if (!list.is_array()) reader.fail(field, "is not a list");
  std::vector<ShardInfo> shards;
  for (std::size_t i = 0; i < list.size(); ++i) {
    const std::string entry = fmt::format("{}[{}]", field, i);
    ShardInfo shard;
    shard.file = reader.text(list[i], entry + ".file", "file");
    // Shards live directly in the dataset directory; anything else would read outside it.
    if (!is_plain_file_name(shard.file))
      reader.fail(entry + ".file", "is not a plain file name");
    shard.tokens = reader.count(list[i], entry + ".tokens", "tokens");
    shard.documents = reader.count(list[i], entry + ".documents", "documents");
    shard.bytes = static_cast<std::uint64_t>(reader.count(list[i], entry + ".bytes", "bytes"));
    shard.checksum = reader.text(list[i], entry + ".checksum", "checksum");
    shards.push_back(std::move(shard));
  }
  return shards;
}

TokenizerIdentity tokenizer_from_json(const FieldReader& reader, const json& object) {
  TokenizerIdentity t;
  t.name = reader.text(object, "tokenizer.name", "name");
  // Format 1.0 manifests had no kind: only the byte tokenizer existed then.
  if (object.is_object() && object.contains("kind")) {
    t.kind = reader.text(object, "tokenizer.kind", "kind");
    if (std::find(std::begin(kTokenizerKinds), std::end(kTokenizerKinds), t.kind) == std::end(kTokenizerKinds))
      reader.fail("tokenizer.kind",
                  fmt::format("is '{}', not one of byte, sentencepiece, huggingface, external", abbreviate(t.kind)));
  } else {
    t.kind = t.name == "byte" ? "byte" : "external";
  }
  t.vocab_size = reader.integer(object, "tokenizer.vocab_size", "vocab_size");
  if (t.vocab_size <= 0 || t.vocab_size > std::numeric_limits<std::int32_t>::max())
    reader.fail("tokenizer.vocab_size", "is out of range");
  const std::int64_t eos = reader.integer(object, "tokenizer.eos_id", "eos_id");
  // External ids, and a tokenizer.json without an end-of-text token, may have no EOS.
  const std::int64_t lowest = t.kind == "external" || t.kind == "huggingface" ? -1 : 0;
  if (eos < lowest || eos >= t.vocab_size) reader.fail("tokenizer.eos_id", "is not a valid id below vocab_size");
  t.eos_id = static_cast<std::int32_t>(eos);
  if (t.kind == "sentencepiece" || t.kind == "huggingface") {
    t.model_file = reader.text(object, "tokenizer.model", "model");
    if (!is_plain_file_name(t.model_file)) reader.fail("tokenizer.model", "is not a plain file name");
    t.model_checksum = reader.text(object, "tokenizer.model_checksum", "model_checksum");
  }
  return t;
}

}  // namespace

void write_manifest(const std::string& path, const Manifest& manifest) {
  json train = json::array();
  json val = json::array();
  for (const ShardInfo& shard : manifest.train) train.push_back(shard_to_json(shard));
  for (const ShardInfo& shard : manifest.val) val.push_back(shard_to_json(shard));
  const TokenizerIdentity& t = manifest.tokenizer;
  json tokenizer = {{"kind", t.kind}, {"name", t.name}, {"vocab_size", t.vocab_size}, {"eos_id", t.eos_id}};
  if (!t.model_file.empty()) {
    tokenizer["model"] = t.model_file;
    tokenizer["model_checksum"] = t.model_checksum;
  }
  const json document = {
      {"format_version", manifest.format_version},
      {"format_minor", manifest.format_minor},
      {"tokenizer", std::move(tokenizer)},
      {"token_dtype", manifest.token_dtype},
      {"compression", manifest.compression.empty() ? "none" : manifest.compression},
      {"source", manifest.source},
      {"splits", {{"train", std::move(train)}, {"val", std::move(val)}}},
  };
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out << document.dump(2) << '\n';
    out.flush();
    if (!out) throw UserError(fmt::format("cannot write {} (disk full or no permission?)", path));
  }
  fsync_path(path);
}

Manifest read_manifest(const std::string& path) {
  if (const PathStatus status = path_status(path); status.access == PathAccess::missing)
    throw UserError(fmt::format("{} not found: this is not a ustrain dataset, or its conversion "
                                "did not finish; convert the text again",
                                path));
  else if (status.access == PathAccess::unreachable)
    throw UserError(fmt::format("{} {}: check the permissions of the dataset directory", path,
                                describe_unusable(status)));
  const std::string text = read_regular_file(path);
  json document;
  try {
    document = parse_json(text, path);
  } catch (const json::exception& error) {  // parse_error, or out_of_range for a number beyond a double
    throw UserError(fmt::format("{} is not valid JSON ({}); the manifest is damaged: convert the "
                                "dataset again",
                                path, error.what()));
  }

  const FieldReader reader(path);
  Manifest manifest;
  const std::int64_t version = reader.integer(document, "format_version", "format_version");
  if (version > kDatasetFormatVersion)
    throw UserError(fmt::format("{} has dataset format_version {}, but this ustrain reads only up to "
                                "version {}: upgrade ustrain to read this dataset",
                                path, version, kDatasetFormatVersion));
  if (version < 1) reader.fail("format_version", fmt::format("is {}, not a valid version", version));
  manifest.format_version = static_cast<int>(version);

  if (document.contains("format_minor") && document["format_minor"].is_number_integer())
    manifest.format_minor = document["format_minor"].get<int>();
  else
    manifest.format_minor = 0;
  manifest.tokenizer = tokenizer_from_json(reader, reader.member(document, "tokenizer", "tokenizer"));

  // Informational fields: absent in hand-made manifests is fine.
  const auto optional_text = [&](const char* key) {
    return document.contains(key) && document[key].is_string() ? document[key].get<std::string>() : "";
  };
  manifest.token_dtype = optional_text("token_dtype");
  manifest.compression = optional_text("compression");
  manifest.source = optional_text("source");

  const json& splits = reader.member(document, "splits", "splits");
  manifest.train = shards_from_json(reader, splits, Split::train);
  manifest.val = shards_from_json(reader, splits, Split::val);
  return manifest;
}

}  // namespace ustrain
