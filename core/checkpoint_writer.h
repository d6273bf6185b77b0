// Saving training state as checkpoints (format: core/checkpoint_format.h; directory and
// crash safety: core/checkpoint_dir.h).
//
// A save stalls training only while the parameters and AdamW moments are copied into a
// host buffer (kept between saves). A background thread, at the lowest CPU priority, then
// writes the rank file, the manifest, publishes the checkpoint and deletes old ones, while
// training goes on. The thread uses plain POSIX files and never HDF5, which is not
// thread-safe in Debian's build and is what the data loader reads. The next save (or
// wait()) waits for it first.
#pragma once

#include <cstdint>
#include <exception>
#include <functional>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "core/checkpoint_dir.h"
#include "core/checkpoint_faults.h"
#include "core/checkpoint_format.h"
#include "core/model/params.h"
#include "core/safetensors.h"

namespace ustrain {

// Where training stands when a checkpoint is taken.
struct TrainingProgress {
  std::int64_t step = 0;
  std::int64_t tokens_seen = 0;
  double lr = 0;
  double loss = 0;
  std::string data_state;  // TrainingData::state()
};

struct CheckpointWriterConfig {
  std::string root;  // RUN_DIR/checkpoints
  std::int64_t keep_last = 3;
  std::int64_t keep_every = 0;
  bool async = true;
  std::string recipe_toml;
  std::string ustrain_version;
  std::string backend;
  MeshShape mesh;
  int rank = 0;
};

class CheckpointWriter {
 public:
  CheckpointWriter(CheckpointWriterConfig config, SaveFaults faults);
  // Waits for a save in flight; an error it hit is logged.
  ~CheckpointWriter();
  CheckpointWriter(const CheckpointWriter&) = delete;
  CheckpointWriter& operator=(const CheckpointWriter&) = delete;

  // Lays out and allocates the host snapshot (12 bytes per parameter) now, so that the first
  // save does not pay for it; save() does this itself when it was not called.
  void prepare(const ParamSet& params);
  // Saves checkpoint `progress.step`. Returns the seconds training was stalled (the wait for
  // the previous save plus the copy to host memory, plus the write when not async), or
  // nullopt when that checkpoint exists already (nothing changed since it was loaded).
  std::optional<double> save(const ParamSet& params, Backend& backend, const TrainingProgress& progress);
  // Blocks until the last save is published; rethrows the error it hit, if any.
  void wait();
  // Bytes of one checkpoint of this model (all three states).
  std::uint64_t state_bytes() const { return host_.size() * sizeof(float); }

 private:
  void write(const TrainingProgress& progress);  // runs on the worker thread when async

  CheckpointWriterConfig config_;
  SaveFaults faults_;
  CheckpointDirectory dir_;
  std::vector<SafetensorsEntry> entries_;  // rank-file layout: every state of every parameter
  std::vector<CheckpointTensor> tensors_;
  std::vector<float> host_;                // the snapshot, in entry order
  std::thread worker_;
  std::exception_ptr error_;
};

// Writes one rank's file into `dir`: `data_of(i)` returns the bytes of entry i, valid until
// the next call. Returns its manifest record (size and checksums; data_state left empty).
CheckpointFile write_rank_file(const std::string& dir, int rank, const std::vector<SafetensorsEntry>& entries,
                               const std::function<const void*(std::size_t)>& data_of, SaveFaults& faults);
// Writes manifest.json into `dir`, fsynced. Call it after every rank file is on disk.
void write_manifest(const std::string& dir, const CheckpointManifest& manifest);

}  // namespace ustrain
