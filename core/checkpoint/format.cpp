#include "core/checkpoint/format.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "core/rng.h"
#include "kernels/error.h"

namespace ustrain {
namespace {

using Json = nlohmann::ordered_json;

Json mesh_json(const MeshShape& m) { return {{"pp", m.pp}, {"dp", m.dp}, {"cp", m.cp}, {"ep", m.ep}, {"tp", m.tp}}; }

MeshShape mesh_from(const Json& j) {
  return MeshShape{j.at("pp").get<int>(), j.at("dp").get<int>(), j.at("cp").get<int>(), j.at("ep").get<int>(),
                   j.at("tp").get<int>()};
}

Json file_json(const CheckpointFile& f) {
  return {{"name", f.name}, {"rank", f.rank}, {"bytes", f.bytes}, {"data_state", f.data_state},
          {"checksums", f.checksums}};
}

CheckpointFile file_from(const Json& f) {
  return {f.at("name").get<std::string>(), f.at("rank").get<int>(), f.at("bytes").get<std::uint64_t>(),
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
  t.vocab_size = j.at("vocab_size").get<std::int64_t>();
  t.eos_id = j.at("eos_id").get<std::int32_t>();
  const bool known_kind =
      std::find(std::begin(kTokenizerKinds), std::end(kTokenizerKinds), t.kind) != std::end(kTokenizerKinds);
  if (t.kind == "sentencepiece") {
    t.model_file = j.at("model").get<std::string>();
    t.model_checksum = j.at("model_checksum").get<std::string>();
  }
  // The model file is always the one beside the manifest: a path could point anywhere.
  if (!known_kind || t.vocab_size <= 0 || t.eos_id < -1 || t.eos_id >= t.vocab_size ||
      (t.kind == "sentencepiece" && t.model_file != kCheckpointTokenizerModel))
    throw UserError(fmt::format("{}: malformed tokenizer record ({}); the checkpoint is damaged", path,
                                tokenizer_json(t).dump()));
  return t;
}

}  // namespace

std::string file_record_to_json(const CheckpointFile& f) { return file_json(f).dump() + "\n"; }

CheckpointFile file_record_from_json(const std::string& text, const std::string& path) {
  try {
    return file_from(Json::parse(text));
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
  return j.dump(1) + "\n";
}

CheckpointManifest manifest_from_json(const std::string& text, const std::string& path) {
  Json j;
  try {
    j = Json::parse(text);
  } catch (const nlohmann::json::parse_error&) {
    throw UserError(fmt::format("{} is not valid JSON: the checkpoint is damaged or was not written completely; "
                                "use an earlier checkpoint",
                                path));
  }
  CheckpointManifest m;
  try {
    if (j.at("format").get<std::string>() != "ustrain-checkpoint")
      throw UserError(fmt::format("{} is not a ustrain checkpoint manifest", path));
    m.format_version = j.at("format_version").get<int>();
    m.ustrain_version = j.at("ustrain_version").get<std::string>();
    if (m.format_version > kCheckpointFormatVersion || m.format_version < 1)
      throw UserError(fmt::format("{}: checkpoint format version {} (written by ustrain {}); this ustrain reads "
                                  "version {}: use a newer ustrain",
                                  path, m.format_version, m.ustrain_version, kCheckpointFormatVersion));
    m.step = j.at("step").get<std::int64_t>();
    m.tokens_seen = j.at("tokens_seen").get<std::int64_t>();
    m.lr = j.at("lr").get<double>();
    m.loss = j.at("loss").is_null() ? std::nan("") : j.at("loss").get<double>();
    m.loss_scale = j.at("loss_scale").get<double>();
    m.weights_only = j.at("weights_only").get<bool>();
    m.backend = j.at("backend").get<std::string>();
    m.mesh = mesh_from(j.at("mesh"));
    for (const Json& t : j.at("tensors"))
      m.tensors.push_back({t.at("name").get<std::string>(), t.at("shape").get<std::vector<std::int64_t>>(),
                           t.at("states").get<std::vector<std::string>>()});
    for (const Json& f : j.at("files")) m.files.push_back(file_from(f));
    m.recipe_hash = j.at("recipe_hash").get<std::string>();
    m.recipe = j.at("recipe").get<std::string>();
    if (j.contains("tokenizer")) m.tokenizer = tokenizer_from(j.at("tokenizer"), path);
  } catch (const nlohmann::json::exception& e) {
    throw UserError(fmt::format("{}: malformed checkpoint manifest ({}); the checkpoint is damaged", path, e.what()));
  }
  if (m.step < 0 || m.files.empty())
    throw UserError(fmt::format("{}: malformed checkpoint manifest (no rank files); the checkpoint is damaged", path));
  return m;
}

}  // namespace ustrain
