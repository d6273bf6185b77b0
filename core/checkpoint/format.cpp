#include "core/checkpoint/format.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>
#include <optional>
#include <stdexcept>
#include <string_view>
#include <vector>
#include <nlohmann/json.hpp>

#include "core/model/rng.h"
#include "data/files/crc32.h"
#include "data/files/json_input.h"
#include "kernels/error.h"

namespace ustrain {
namespace {

using Json = nlohmann::ordered_json;

// A JSON integer as T. Anything else (a float such as 1e28, a string, an integer outside T)
// is a malformed manifest: nlohmann's get<T>() would convert it with undefined behaviour.
struct MalformedValue : std::runtime_error {
  using std::runtime_error::runtime_error;
};

template <class T>
T integer(const Json& v) {
  using Limits = std::numeric_limits<T>;
  if (v.is_number_unsigned()) {
    const auto u = v.get<std::uint64_t>();
    if (u <= static_cast<std::uint64_t>(Limits::max())) return static_cast<T>(u);
  } else if (v.is_number_integer()) {
    const auto i = v.get<std::int64_t>();
    if (i >= static_cast<std::int64_t>(Limits::min()) &&
        (i < 0 || static_cast<std::uint64_t>(i) <= static_cast<std::uint64_t>(Limits::max())))
      return static_cast<T>(i);
  }
  std::string shown = v.dump();
  if (shown.size() > 40) shown = shown.substr(0, 40) + "...";
  throw MalformedValue(fmt::format("{} where an integer in [{}, {}] belongs", shown, Limits::min(), Limits::max()));
}

template <class T>
std::vector<T> integers(const Json& v) {
  if (!v.is_array()) throw MalformedValue("a list of integers expected, found " + std::string(v.type_name()));
  std::vector<T> out;
  for (const Json& e : v) out.push_back(integer<T>(e));
  return out;
}

// The manifest's own checksum is its last field: the CRC-32 of the whole file as written with
// these eight zeros in place of the digits.
constexpr std::string_view kChecksumField = "\"manifest_crc32\": \"";
constexpr std::string_view kChecksumPlaceholder = "00000000";

std::string crc32_hex(std::string_view text) { return fmt::format("{:08x}", crc32_update(0, text.data(), text.size())); }

// Where the checksum's digits are in `text`, when it has them: eight hex digits in quotes.
std::optional<std::size_t> checksum_digits(const std::string& text) {
  const std::size_t field = text.rfind(kChecksumField);
  if (field == std::string::npos) return std::nullopt;
  const std::size_t digits = field + kChecksumField.size();
  if (digits + kChecksumPlaceholder.size() >= text.size() || text[digits + kChecksumPlaceholder.size()] != '"')
    return std::nullopt;
  for (std::size_t i = digits; i < digits + kChecksumPlaceholder.size(); ++i)
    if (std::isxdigit(static_cast<unsigned char>(text[i])) == 0) return std::nullopt;
  return digits;
}

// A manifest of a format version from before the checksum may lack it; any other must carry
// it, well formed, and match it. Hex digits compare in either case.
void check_manifest_checksum(const Json& j, const std::string& text, const std::string& path, int format_version,
                             bool& checksummed) {
  const std::optional<std::size_t> digits = checksum_digits(text);
  checksummed = digits.has_value();
  if (!digits) {
    if (j.contains("manifest_crc32"))
      throw UserError(fmt::format("{}: manifest_crc32 is {}, not eight hex digits in quotes; the manifest was edited "
                                  "or damaged: use an earlier checkpoint",
                                  path, j.at("manifest_crc32").dump()));
    if (format_version >= kFirstChecksummedFormatVersion)
      throw UserError(fmt::format("{} has no manifest_crc32, which every manifest of format version {} carries: it "
                                  "was edited or damaged; use an earlier checkpoint",
                                  path, format_version));
    return;
  }
  std::string zeroed = text;
  zeroed.replace(*digits, kChecksumPlaceholder.size(), kChecksumPlaceholder);
  std::string expected = text.substr(*digits, kChecksumPlaceholder.size());
  std::transform(expected.begin(), expected.end(), expected.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (crc32_hex(zeroed) != expected)
    throw UserError(fmt::format("{} does not match its checksum (manifest_crc32 {}, the file has {}): the manifest "
                                "was edited or damaged; use an earlier checkpoint",
                                path, expected, crc32_hex(zeroed)));
}

// Values no save writes, each with its own message.
void check_manifest_values(const CheckpointManifest& m, const std::string& path) {
  const auto bad = [&](const std::string& what) {
    throw UserError(fmt::format("{}: {}; the checkpoint is damaged: use an earlier checkpoint", path, what));
  };
  if (m.step < 0) bad(fmt::format("step {} is negative", m.step));
  if (m.tokens_seen < 0) bad(fmt::format("tokens_seen {} is negative", m.tokens_seen));
  if (m.step == 0 && m.tokens_seen != 0 && !m.weights_only)
    bad(fmt::format("tokens_seen is {} at step 0", m.tokens_seen));
  if (!std::isfinite(m.lr) || m.lr < 0) bad(fmt::format("the learning rate {} is not a finite number >= 0", m.lr));
  if (!std::isfinite(m.loss_scale) || m.loss_scale <= 0)
    bad(fmt::format("the loss scale {} is not a finite number > 0", m.loss_scale));
  const MeshShape& mesh = m.mesh;
  for (int extent : {mesh.pp, mesh.dp, mesh.cp, mesh.ep, mesh.tp})
    if (extent < 1) bad(fmt::format("the process mesh has an extent of {}", extent));
  const std::int64_t ranks = std::int64_t{mesh.pp} * mesh.dp * mesh.cp * mesh.tp;  // ep borrows from dp * cp
  if (m.files.empty()) bad("it lists no rank files");
  if (static_cast<std::int64_t>(m.files.size()) > ranks)
    bad(fmt::format("it lists {} rank files for a mesh of {} ranks", m.files.size(), ranks));
  std::vector<bool> seen(static_cast<std::size_t>(std::min<std::int64_t>(ranks, 1 << 20)), false);
  for (const CheckpointFile& f : m.files) {
    if (f.rank < 0 || f.rank >= ranks) bad(fmt::format("rank file {} is for rank {}, outside the mesh", f.name, f.rank));
    if (f.name != rank_file_name(f.rank)) bad(fmt::format("rank {}'s file is named {}", f.rank, f.name));
    if (seen[static_cast<std::size_t>(f.rank)]) bad(fmt::format("rank {} is listed twice", f.rank));
    seen[static_cast<std::size_t>(f.rank)] = true;
  }
  for (const CheckpointTensor& t : m.tensors) {
    std::int64_t elements = 1;
    for (std::int64_t d : t.shape)
      if (d < 0 || (d > 0 && elements > std::numeric_limits<std::int64_t>::max() / d))
        bad(fmt::format("tensor {} has an impossible shape", t.name));
      else
        elements *= d;
    if (t.shape.size() > 4) bad(fmt::format("tensor {} has {} dimensions", t.name, t.shape.size()));
    if (t.states.empty()) bad(fmt::format("tensor {} has no stored state", t.name));
  }
}

Json mesh_json(const MeshShape& m) { return {{"pp", m.pp}, {"dp", m.dp}, {"cp", m.cp}, {"ep", m.ep}, {"tp", m.tp}}; }

MeshShape mesh_from(const Json& j) {
  return MeshShape{.pp = integer<int>(j.at("pp")), .dp = integer<int>(j.at("dp")), .cp = integer<int>(j.at("cp")),
                   .tp = integer<int>(j.at("tp")), .ep = integer<int>(j.at("ep"))};
}

Json file_json(const CheckpointFile& f) {
  return {{"name", f.name}, {"rank", f.rank}, {"bytes", f.bytes}, {"data_state", f.data_state},
          {"checksums", f.checksums}};
}

CheckpointFile file_from(const Json& f) {
  return {f.at("name").get<std::string>(), integer<int>(f.at("rank")), integer<std::uint64_t>(f.at("bytes")),
          f.at("checksums").get<std::map<std::string, std::string>>(), f.at("data_state").get<std::string>()};
}

Json tokenizer_json(const TokenizerIdentity& t) {
  Json j = {{"kind", t.kind}, {"name", t.name}, {"vocab_size", t.vocab_size}, {"eos_id", t.eos_id}};
  if (!t.model_file.empty()) {
    j["model"] = t.model_file;
    j["model_checksum"] = t.model_checksum;
  }
  return j;
}

TokenizerIdentity tokenizer_from(const Json& j, const std::string& path) {
  TokenizerIdentity t;
  t.kind = j.at("kind").get<std::string>();
  t.name = j.at("name").get<std::string>();
  t.vocab_size = integer<std::int64_t>(j.at("vocab_size"));
  t.eos_id = integer<std::int32_t>(j.at("eos_id"));
  const bool known_kind =
      std::find(std::begin(kTokenizerKinds), std::end(kTokenizerKinds), t.kind) != std::end(kTokenizerKinds);
  if (t.kind == "sentencepiece" || t.kind == "huggingface") {
    t.model_file = j.at("model").get<std::string>();
    t.model_checksum = j.at("model_checksum").get<std::string>();
  }
  // The model file is always the one beside the manifest: a path could point anywhere.
  if (!known_kind || t.vocab_size <= 0 || t.eos_id < -1 || t.eos_id >= t.vocab_size ||
      (t.kind == "sentencepiece" && t.model_file != kCheckpointTokenizerModel) ||
      (t.kind == "huggingface" && t.model_file != kCheckpointTokenizerJson))
    throw UserError(fmt::format("{}: malformed tokenizer record ({}); the checkpoint is damaged", path,
                                tokenizer_json(t).dump()));
  return t;
}

}  // namespace

std::string file_record_to_json(const CheckpointFile& f) { return file_json(f).dump() + "\n"; }

CheckpointFile file_record_from_json(const std::string& text, const std::string& path) {
  try {
    return file_from(parse_json(text, path));
  } catch (const nlohmann::json::exception& e) {
    throw UserError(fmt::format("{}: malformed rank-file record ({})", path, e.what()));
  }
}

const CheckpointTensor* CheckpointManifest::find(const std::string& name) const {
  for (const CheckpointTensor& t : tensors)
    if (t.name == name) return &t;
  return nullptr;
}

std::string rank_file_name(int rank) { return fmt::format("rank-{:05}.safetensors", rank); }

std::string recipe_hash(const std::string& recipe_toml) { return fmt::format("{:016x}", hash_string(recipe_toml)); }

std::string manifest_to_json(const CheckpointManifest& m) {
  Json j;
  j["format"] = "ustrain-checkpoint";
  j["format_version"] = m.format_version;
  j["ustrain_version"] = m.ustrain_version;
  j["step"] = m.step;
  j["tokens_seen"] = m.tokens_seen;
  j["lr"] = m.lr;
  j["loss"] = std::isfinite(m.loss) ? Json(m.loss) : Json(nullptr);
  j["loss_scale"] = m.loss_scale;
  j["weights_only"] = m.weights_only;
  j["backend"] = m.backend;
  j["mesh"] = mesh_json(m.mesh);
  j["tensors"] = Json::array();
  for (const CheckpointTensor& t : m.tensors)
    j["tensors"].push_back({{"name", t.name}, {"shape", t.shape}, {"states", t.states}});
  j["files"] = Json::array();
  for (const CheckpointFile& f : m.files) j["files"].push_back(file_json(f));
  if (m.tokenizer) j["tokenizer"] = tokenizer_json(*m.tokenizer);
  j["recipe_hash"] = m.recipe_hash;
  j["recipe"] = m.recipe;
  j["manifest_crc32"] = kChecksumPlaceholder;
  std::string text = j.dump(1) + "\n";
  const std::optional<std::size_t> digits = checksum_digits(text);
  USTRAIN_ASSERT(digits.has_value(), "the manifest checksum field was not written last");
  text.replace(*digits, kChecksumPlaceholder.size(), crc32_hex(text));
  return text;
}

CheckpointManifest manifest_from_json(const std::string& text, const std::string& path) {
  Json j;
  try {
    j = parse_json(text, path);
  } catch (const nlohmann::json::exception&) {  // parse_error, or out_of_range for a number beyond a double
    throw UserError(fmt::format("{} is not valid JSON: the checkpoint is damaged or was not written completely; "
                                "use an earlier checkpoint",
                                path));
  }
  CheckpointManifest m;
  try {
    if (j.at("format").get<std::string>() != "ustrain-checkpoint")
      throw UserError(fmt::format("{} is not a ustrain checkpoint manifest", path));
    m.format_version = integer<int>(j.at("format_version"));
    m.ustrain_version = j.at("ustrain_version").get<std::string>();
    if (m.format_version > kCheckpointFormatVersion || m.format_version < 1)
      throw UserError(fmt::format("{}: checkpoint format version {} (written by ustrain {}); this ustrain reads "
                                  "version {}: use a newer ustrain",
                                  path, m.format_version, m.ustrain_version, kCheckpointFormatVersion));
    check_manifest_checksum(j, text, path, m.format_version, m.checksummed);
    m.step = integer<std::int64_t>(j.at("step"));
    m.tokens_seen = integer<std::int64_t>(j.at("tokens_seen"));
    m.lr = j.at("lr").get<double>();
    m.loss = j.at("loss").is_null() ? std::nan("") : j.at("loss").get<double>();
    m.loss_scale = j.at("loss_scale").get<double>();
    m.weights_only = j.at("weights_only").get<bool>();
    m.backend = j.at("backend").get<std::string>();
    m.mesh = mesh_from(j.at("mesh"));
    for (const Json& t : j.at("tensors"))
      m.tensors.push_back({t.at("name").get<std::string>(), integers<std::int64_t>(t.at("shape")),
                           t.at("states").get<std::vector<std::string>>()});
    for (const Json& f : j.at("files")) m.files.push_back(file_from(f));
    m.recipe_hash = j.at("recipe_hash").get<std::string>();
    m.recipe = j.at("recipe").get<std::string>();
    if (j.contains("tokenizer")) m.tokenizer = tokenizer_from(j.at("tokenizer"), path);
  } catch (const nlohmann::json::exception& e) {
    throw UserError(fmt::format("{}: malformed checkpoint manifest ({}); the checkpoint is damaged", path, e.what()));
  } catch (const MalformedValue& e) {
    throw UserError(fmt::format("{}: malformed checkpoint manifest ({}); the checkpoint is damaged", path, e.what()));
  }
  check_manifest_values(m, path);
  return m;
}

}  // namespace ustrain
