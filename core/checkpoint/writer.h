// Saving training state as checkpoints (format: core/checkpoint/format.h; directory and
// crash safety: core/checkpoint/dir.h).
//
// Every rank of a job saves its chunk of every parameter and AdamW moment of every store
// (ModelParams::owned), and the model state it was handed (TrainingProgress::model_state): the ranks write their files in parallel into the directory rank 0
// staged, hand rank 0 their file's record, and rank 0 writes the tokenizer and the manifest
// and publishes the checkpoint once every file is on disk. A rank that fails makes every rank fail the save,
// and nothing is published.
//
// A save stalls training only while the parameters and AdamW moments are copied into a
// host buffer (kept between saves; the backend's host staging, page-locked on a GPU so the
// copies run at full bus speed). A background thread, at the lowest CPU priority, then
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

#include "core/checkpoint/dir.h"
#include "core/checkpoint/faults.h"
#include "core/checkpoint/format.h"
#include "core/checkpoint/model_state.h"
#include "core/checkpoint/tokenizer.h"
#include "core/model/params.h"
#include "core/checkpoint/safetensors.h"
#include "core/memory/memory_plan.h"
#include "parallel/comm/communicator.h"

namespace ustrain {

// Where training stands when a checkpoint is taken.
struct TrainingProgress {
  std::int64_t step = 0;
  std::int64_t tokens_seen = 0;
  double lr = 0;
  double loss = 0;
  std::string data_state;  // TrainingData::state()
  double loss_scale = 1.0;  // LossScaler::scale(); 1 outside fp16
  // The model state this rank saves (core/checkpoint/model_state.h), copied at the step.
  std::vector<std::pair<std::string, std::vector<float>>> model_state;
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
  // Every rank of the job, used only by the writer (from its thread when async); null for a
  // single process. This rank's index in it is its rank file's number.
  Communicator* group = nullptr;
  // The model's tokenizer, kept in every checkpoint by the rank that writes the manifest.
  std::optional<TokenizerSnapshot> tokenizer;
  // Every model-state tensor of the model (ModelState::whole_model), which the manifest lists.
  std::vector<ParamDecl> model_state;
};

class CheckpointWriter {
 public:
  CheckpointWriter(CheckpointWriterConfig config, SaveFaults faults);
  // Waits for a save in flight; an error it hit is logged.
  ~CheckpointWriter();
  CheckpointWriter(const CheckpointWriter&) = delete;
  CheckpointWriter& operator=(const CheckpointWriter&) = delete;

  // Lays out and allocates the host snapshot (12 bytes per parameter this rank saves) now, as
  // `backend`'s host staging (Backend::allocate_host_staging), so that the first save does not
  // pay for it; save() does this itself when it was not called.
  void prepare(const ModelParams& params, Backend& backend);
  // Saves checkpoint `progress.step`. Returns the seconds training was stalled (the wait for
  // the previous save plus the copy to host memory, plus the write when not async), or
  // nullopt when that checkpoint exists already (nothing changed since it was loaded).
  std::optional<double> save(const ModelParams& params, Backend& backend, const TrainingProgress& progress);
  // Blocks until the last save is published; rethrows the error it hit, if any.
  void wait();
  // Bytes this rank saves per checkpoint (all three states of its chunks).
  std::uint64_t state_bytes() const { return host_floats_ * sizeof(float); }

 private:
  void write(const TrainingProgress& progress);  // runs on the worker thread when async
  float* host() const { return static_cast<float*>(host_.get()); }
  int rank() const { return config_.group ? config_.group->rank() : 0; }
  // Throws on every rank when `failure` holds a message on any: ranks agree on each stage.
  void agree(const std::string& failure, const std::string& what) const;

  CheckpointWriterConfig config_;
  SaveFaults faults_;
  CheckpointDirectory dir_;
  std::vector<SafetensorsEntry> entries_;  // rank-file layout: this rank's boxes of every state
  std::vector<Tensor> sources_;            // per entry: where its elements live (1-D)
  std::vector<CheckpointTensor> tensors_;
  HostStaging host_;                       // the snapshot, in entry order
  std::size_t host_floats_ = 0;
  std::thread worker_;
  std::exception_ptr error_;
};

// The host buffer a CheckpointWriter of `params` allocates (prepare()): this rank's owned pieces
// of every parameter and AdamW moment of every store, 12 bytes per parameter it saves. Known
// once the model is planned, before its memory exists.
inline constexpr const char* kCheckpointSnapshot = "checkpoint snapshot";
std::uint64_t checkpoint_snapshot_bytes(const ModelParams& params);
// Declares that buffer in `plan` (a run that saves checkpoints).
void plan_checkpoint_snapshot(const ModelParams& params, MemoryPlan& plan);

// Writes one rank's file of the checkpoint of `step` into `dir`: `data_of(i)` returns the bytes
// of entry i, valid until the next call. Returns its manifest record (size and checksums;
// data_state left empty).
CheckpointFile write_rank_file(const std::string& dir, int rank, std::int64_t step,
                               const std::vector<SafetensorsEntry>& entries,
                               const std::function<const void*(std::size_t)>& data_of, SaveFaults& faults);
// Writes manifest.json into `dir`, fsynced. Call it after every rank file is on disk.
void write_manifest(const std::string& dir, const CheckpointManifest& manifest);

}  // namespace ustrain
