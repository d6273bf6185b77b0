// Reading checkpoints (format: core/checkpoint/format.h).
//
// Opening checks that the directory is a complete checkpoint this build reads: a manifest of
// a known format version, every rank file it lists present with the recorded size, and rank
// files whose entries match the manifest and together cover every stored tensor. read()
// then assembles any box of any tensor from whichever rank files hold it, so a checkpoint
// saved under one parallel layout loads under another, and verifies the checksum of every
// slice it reads. Each problem is a UserError naming the file.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/checkpoint/format.h"
#include "core/checkpoint/model_state.h"
#include "core/checkpoint/slices.h"
#include "core/model/params.h"
#include "core/checkpoint/safetensors_file.h"

namespace ustrain {

class CheckpointReader {
 public:
  explicit CheckpointReader(const std::string& dir);

  const std::string& dir() const { return dir_; }
  const CheckpointManifest& manifest() const { return manifest_; }
  // The data-loader position that rank `rank` saved.
  const std::string& data_state(int rank) const;
  bool has(std::string_view state, const std::string& name) const;

  // Fills `out` with `region` (global coordinates) of one state of a tensor: region.numel()
  // floats, row-major over the region.
  void read(std::string_view state, const std::string& name, const Slice& region, float* out) const;

 private:
  struct Shard {
    const SafetensorsReader* file;
    const SafetensorsEntry* entry;
    Slice slice;
    std::string checksum;
  };
  void index_file(const CheckpointFile& record, const SafetensorsReader& file);
  void check_coverage() const;
  void read_shard(const Shard& shard, float* dst) const;

  std::string dir_;
  CheckpointManifest manifest_;
  std::vector<std::unique_ptr<SafetensorsReader>> files_;
  std::map<std::pair<std::string, std::string>, std::vector<Shard>, std::less<>> shards_;  // (state, name)
};

// Copies every parameter of `params` (and with `with_optimizer` its AdamW moments) from the
// checkpoint, and the model state this rank holds (`state`; a tensor the checkpoint lacks, as
// from a run without it or an import, starts at zero). UserError naming the checkpoint when it
// holds other tensors or other shapes than the model, i.e. was written for another model
// shape, or lacks optimizer state.
void load_model_state(const CheckpointReader& checkpoint, const ModelParams& params, Backend& backend,
                      bool with_optimizer, const ModelState& state = {});

}  // namespace ustrain
