// The checkpoint format (version 2): a directory holding one safetensors file per rank and
// manifest.json.
//
//   step-00001000/
//     rank-00000.safetensors   the slices of tensors this rank holds (core/checkpoint/slices.h)
//     manifest.json            the whole checkpoint's description, written last
//
// Rank files are ordinary safetensors files (readable by any safetensors library); each
// entry is one slice of one state (param, adam_m, adam_v) of one global tensor, float32.
// Model state that is not trained (core/checkpoint/model_state.h: an MoE router's balancing
// bias) has the state param only, whole, in the file of one of the ranks that hold it.
// Their __metadata__ says {"format": "ustrain-checkpoint-rank", "format_version", "rank"}.
//
// manifest.json holds what a resumed run needs besides the tensors: step, tokens seen, the
// learning rate and loss of the last step, the loss scale, the resolved recipe (TOML) and
// its hash, the ustrain version, the backend, the process mesh, the global tensors (name,
// shape, stored states), and per rank file its size, the CRC-32 of every entry and that
// rank's data-loader position (opaque JSON text; the loader's shuffle is the only random
// stream training draws from, so it is the whole RNG state). With several ranks, rank 0
// gathers these few-kilobyte summaries and writes the manifest after every rank's file is
// on disk. Its last field, manifest_crc32, is the CRC-32 of the file as written with "00000000"
// in place of that field's digits, so that an edit or a flipped bit anywhere (the step, a data
// position) is refused instead of resuming into another run. A malformed manifest_crc32 is an
// error, and so is a missing one from format version 2 on; version 1 manifests from before the
// field existed are read without it (the reader warns). Rank files also record the step they
// were saved at.
//
// The manifest also names the tokenizer the model was trained with ("tokenizer": kind, name,
// vocab_size, eos_id), so that a checkpoint decodes without its dataset. A sentencepiece
// model travels as tokenizer.model beside the rank files (a Hugging Face tokenizer as
// tokenizer.json), written by rank 0 with the
// manifest, which records its CRC-32 ("model", "model_checksum"). Checkpoints written before
// this have no "tokenizer" and still load: their tokenizer is found through the recipe's
// dataset (core/checkpoint/tokenizer.h).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "data/tokenizers/tokenizer.h"
#include "parallel/mesh.h"

namespace ustrain {

// Version 2 manifests always carry manifest_crc32; version 1 ones may lack it.
inline constexpr int kCheckpointFormatVersion = 2;
inline constexpr int kFirstChecksummedFormatVersion = 2;
inline constexpr const char* kManifestName = "manifest.json";
inline constexpr const char* kCheckpointTokenizerModel = "tokenizer.model";
inline constexpr const char* kCheckpointTokenizerJson = "tokenizer.json";  // kind huggingface

struct CheckpointTensor {
  std::string name;                   // global (Hugging Face) name
  std::vector<std::int64_t> shape;    // global shape
  std::vector<std::string> states;    // which of param, adam_m, adam_v are stored
};

struct CheckpointFile {
  std::string name;  // relative to the checkpoint directory: "rank-00000.safetensors"
  int rank = 0;
  std::uint64_t bytes = 0;
  std::map<std::string, std::string> checksums;  // entry name -> "crc32:xxxxxxxx"
  std::string data_state;                        // this rank's data-loader position
};

struct CheckpointManifest {
  int format_version = kCheckpointFormatVersion;
  std::string ustrain_version;
  std::int64_t step = 0;
  std::int64_t tokens_seen = 0;
  double lr = 0;             // learning rate of the last step (a function of the step and recipe)
  double loss = 0;           // training loss of the last step; NaN when none was taken
  double loss_scale = 1.0;   // dynamic loss scale; 1 while training in fp32
  bool weights_only = false; // only parameters, no optimizer state or data position (an import)
  std::string backend;       // e.g. "cpu (2 threads)"; exactness holds on the same backend
  MeshShape mesh;            // the saving job's layout, informational (its ep borrows from dp * cp)
  std::vector<CheckpointTensor> tensors;
  std::vector<CheckpointFile> files;
  std::string recipe;        // the resolved recipe, TOML
  std::string recipe_hash;   // recipe_hash(recipe)
  bool checksummed = true;   // as read: whether it carried manifest_crc32 (version 1 may not)
  // The model's tokenizer; model_file is kCheckpointTokenizerModel for sentencepiece. Absent
  // in checkpoints written before checkpoints kept it, and in imports of models whose
  // tokenizer ustrain does not read.
  std::optional<TokenizerIdentity> tokenizer;

  const CheckpointTensor* find(const std::string& name) const;
};

std::string rank_file_name(int rank);  // "rank-00000.safetensors"
// A stable 64-bit hash of the recipe text, 16 hex digits (FNV-1a then the splitmix64 mix).
std::string recipe_hash(const std::string& recipe_toml);

std::string manifest_to_json(const CheckpointManifest& m);
// One rank file's record as one line of JSON: what a rank hands rank 0 for the manifest.
std::string file_record_to_json(const CheckpointFile& f);
CheckpointFile file_record_from_json(const std::string& text, const std::string& path);
// UserError naming `path` for malformed JSON, missing fields, a format version newer than
// this build reads, a checksum that does not match, or a value no save writes (a negative
// step, a rank outside the mesh, ...), each with its own message.
CheckpointManifest manifest_from_json(const std::string& text, const std::string& path);

}  // namespace ustrain
