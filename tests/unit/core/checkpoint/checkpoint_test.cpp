// Checkpoints of a real model: what is saved comes back bit for bit; the run's checkpoint
// directory keeps what retention says; damaged or foreign checkpoints are refused with a
// message naming the file.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cctype>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "core/checkpoint/dir.h"
#include "core/checkpoint/format.h"
#include "core/checkpoint/fs.h"
#include "core/checkpoint/reader.h"
#include "core/train/resume.h"
#include "core/checkpoint/writer.h"
#include "core/model/llama.h"
#include "core/model/rng.h"
#include "kernels/error.h"
#include "tests/unit/support/user_error_support.h"

namespace ustrain {
namespace {

namespace fs = std::filesystem;

std::string temp_dir(const std::string& tag) {
  const std::string dir = (fs::temp_directory_path() /
                           ("ustrain_ckpt_" + std::to_string(::getpid()) + "_" + tag + "_" +
                            ::testing::UnitTest::GetInstance()->current_test_info()->name()))
                              .string();
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

ModelSection small_model(std::int64_t layers = 2) {
  ModelSection m;
  m.vocab_size = 19;
  m.d_model = 8;
  m.n_layers = layers;
  m.n_heads = 2;
  m.n_kv_heads = 1;
  m.ffn_hidden = 12;
  m.max_seq_len = 4;
  return m;
}

// A model bound to memory whose parameters and moments hold distinct pseudo-random values.
struct ModelState {
  std::unique_ptr<Backend> backend = make_backend(Device::cpu, 1);
  LlamaModel model;
  MemoryPlan plan;
  std::unique_ptr<PlannedMemory> memory;

  explicit ModelState(const ModelSection& cfg) : model(cfg, 1, 4, Recompute::none) {
    model.plan(plan);
    memory = std::make_unique<PlannedMemory>(plan, *backend);
    model.bind(*memory, *backend);
  }
  static constexpr ParamState kStates[] = {ParamState::value, ParamState::adam_m, ParamState::adam_v};
  void randomise(std::uint64_t seed) {
    for (int s = 0; s < 3; ++s)
      for (const ParamPiece& p : model.params().held(kStates[s])) {
        const double scale = s == 0 ? 1.0 : s == 1 ? 0.1 : 0.01;
        fill_normal(p.data.f32(), static_cast<std::size_t>(p.data.numel()), seed + 3 * p.param + s, scale);
      }
  }
  // Every state of every parameter, concatenated, as raw bits.
  std::vector<std::uint32_t> bits() const {
    std::vector<std::uint32_t> out;
    for (ParamState state : kStates)
      for (const ParamPiece& p : model.params().held(state)) {
        const std::size_t n = static_cast<std::size_t>(p.data.numel());
        const std::size_t at = out.size();
        out.resize(at + n);
        std::memcpy(out.data() + at, p.data.f32(), n * 4);
      }
    return out;
  }
};

CheckpointWriterConfig config_for(const std::string& root, bool async) {
  CheckpointWriterConfig c;
  c.root = root;
  c.keep_last = 2;
  c.async = async;
  c.recipe_toml = "[run]\nname = \"t\"\n";
  c.ustrain_version = "0.0.test";
  c.backend = "cpu (1 threads)";
  return c;
}

TEST(CheckpointWriter, SavedStateComesBackBitForBit) {
  for (bool async : {true, false}) {
    const std::string root = temp_dir(async ? "async" : "sync");
    ModelState saved(small_model());
    saved.randomise(11);
    {
      CheckpointWriter writer(config_for(root, async), SaveFaults());
      const TrainingProgress progress{7, 7 * 64, 1e-3, 2.5, "{\"pos\":7}", 1.0, {}};
      ASSERT_TRUE(writer.save(saved.model.params(), *saved.backend, progress).has_value());
      writer.wait();
    }
    const CheckpointReader r(root + "/step-00000007");
    EXPECT_EQ(r.manifest().step, 7);
    EXPECT_EQ(r.manifest().tokens_seen, 7 * 64);
    EXPECT_EQ(r.manifest().lr, 1e-3);
    EXPECT_EQ(r.manifest().ustrain_version, "0.0.test");
    EXPECT_EQ(r.data_state(0), "{\"pos\":7}");
    EXPECT_EQ(fs::read_symlink(root + "/latest"), "step-00000007");
    ModelState loaded(small_model());
    load_model_state(r, loaded.model.params(), *loaded.backend, /*with_optimizer=*/true);
    EXPECT_EQ(loaded.bits(), saved.bits());
    fs::remove_all(root);
  }
}

TEST(CheckpointWriter, KeepsTheNewestAndEveryNth) {
  const std::string root = temp_dir("retention");
  ModelState s(small_model(1));
  CheckpointWriterConfig c = config_for(root, true);
  c.keep_last = 2;
  c.keep_every = 4;
  CheckpointWriter writer(c, SaveFaults());
  for (std::int64_t step = 1; step <= 10; ++step)
    writer.save(s.model.params(), *s.backend, {step, 0, 0, 0, "", 1.0, {}});
  writer.wait();
  EXPECT_EQ(CheckpointDirectory(root).complete_steps(), (std::vector<std::int64_t>{4, 8, 9, 10}));
  EXPECT_EQ(fs::read_symlink(root + "/latest"), "step-00000010");
  // Saving a step that exists already (a resumed run stopped at once) is a no-op.
  EXPECT_FALSE(writer.save(s.model.params(), *s.backend, {10, 0, 0, 0, "", 1.0, {}}).has_value());
  fs::remove_all(root);
}

TEST(CheckpointDirectory, CleansUpWhatAnInterruptedSaveLeft) {
  const std::string root = temp_dir("leftovers");
  const CheckpointDirectory dir(root);
  for (std::int64_t step : {3, 6}) {
    fs::create_directories(dir.path_of(step));
    std::ofstream(dir.path_of(step) + "/manifest.json") << "{}";
  }
  fs::create_directories(dir.path_of(9) + ".tmp");   // a save killed midway
  fs::create_directories(dir.path_of(1) + ".deleting");
  fs::create_directories(dir.path_of(12));           // no manifest: never complete
  fs::create_symlink("step-00000003", root + "/latest");  // one behind
  EXPECT_EQ(dir.complete_steps(), (std::vector<std::int64_t>{3, 6}));
  dir.remove_leftovers();
  EXPECT_FALSE(fs::exists(dir.path_of(9) + ".tmp"));
  EXPECT_FALSE(fs::exists(dir.path_of(1) + ".deleting"));
  EXPECT_EQ(fs::read_symlink(root + "/latest"), "step-00000006");
  EXPECT_EQ(*dir.newest(), dir.path_of(6));
  // Resuming from step 3 moves step 6 aside and points `latest` back.
  EXPECT_EQ(dir.set_aside_after(3, false), (std::vector<std::int64_t>{6}));
  EXPECT_EQ(dir.complete_steps(), (std::vector<std::int64_t>{3}));
  EXPECT_TRUE(fs::exists(root + "/abandoned/step-00000006/manifest.json"));
  EXPECT_EQ(fs::read_symlink(root + "/latest"), "step-00000003");
  fs::remove_all(root);
}

class BadCheckpoint : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = temp_dir("bad");
    ModelState s(small_model());
    s.randomise(5);
    CheckpointWriter writer(config_for(root_, false), SaveFaults());
    writer.save(s.model.params(), *s.backend, {4, 0, 0, 0, "", 1.0, {}});
    dir_ = root_ + "/step-00000004";
  }
  void TearDown() override { fs::remove_all(root_); }
  std::string root_, dir_;
};

TEST_F(BadCheckpoint, TruncatedRankFile) {
  const std::string file = dir_ + "/rank-00000.safetensors";
  fs::resize_file(file, fs::file_size(file) / 2);
  expect_error_mentions([&] { CheckpointReader r(dir_); }, {file, "truncated"});
}

TEST_F(BadCheckpoint, MissingRankFile) {
  fs::remove(dir_ + "/rank-00000.safetensors");
  expect_error_mentions([&] { CheckpointReader r(dir_); }, {"rank-00000.safetensors", "lacks"});
}

TEST_F(BadCheckpoint, TruncatedManifest) {
  const std::string manifest = dir_ + "/manifest.json";
  fs::resize_file(manifest, fs::file_size(manifest) / 2);
  expect_error_mentions([&] { CheckpointReader r(dir_); }, {manifest});
}

TEST_F(BadCheckpoint, NewerFormatVersion) {
  const std::string manifest = dir_ + "/manifest.json";
  std::string text = read_text_file(manifest);
  const std::string from = "\"format_version\": 2";
  ASSERT_NE(text.find(from), std::string::npos) << text.substr(0, 200);
  text.replace(text.find(from), from.size(), "\"format_version\": 3");
  write_text_file(manifest, text);
  expect_error_mentions([&] { CheckpointReader r(dir_); }, {manifest, "version 3", "newer ustrain"});
}

// The manifest's text with its manifest_crc32 field (the last) replaced by `field` ("" drops it).
std::string with_checksum_field(std::string text, const std::string& field) {
  const std::size_t at = text.rfind(",\n \"manifest_crc32\"");
  EXPECT_NE(at, std::string::npos) << text;
  return text.substr(0, at) + (field.empty() ? "" : ",\n " + field) + "\n}\n";
}

// Without its checksum a manifest could be edited at will: only format version 1, from before
// the checksum existed, may lack it (and is read with a warning); a malformed one is an error.
TEST_F(BadCheckpoint, AMissingOrMalformedChecksumIsRefused) {
  const std::string manifest = dir_ + "/manifest.json";
  const std::string text = read_text_file(manifest);
  expect_error_mentions([&] { manifest_from_json(with_checksum_field(text, ""), manifest); },
                        {manifest, "has no manifest_crc32", "format version 2"});
  for (const char* field : {"\"manifest_crc32\": \"12z4\"", "\"manifest_crc32\": 17",
                            "\"manifest_crc32\": \"0123456789\""})
    expect_error_mentions([&] { manifest_from_json(with_checksum_field(text, field), manifest); },
                          {manifest, "manifest_crc32 is", "not eight hex digits"});
  std::string version1 = with_checksum_field(text, "");
  version1.replace(version1.find("\"format_version\": 2"), 19, "\"format_version\": 1");
  const CheckpointManifest old = manifest_from_json(version1, manifest);
  EXPECT_FALSE(old.checksummed);
  EXPECT_EQ(old.format_version, 1);
  EXPECT_TRUE(manifest_from_json(text, manifest).checksummed);
}

// The digits are hexadecimal: upper case is the same number.
TEST_F(BadCheckpoint, AnUpperCaseChecksumIsTheSame) {
  const std::string manifest = dir_ + "/manifest.json";
  std::string text = read_text_file(manifest);
  const std::size_t digits = text.rfind("\"manifest_crc32\": \"") + 19;
  for (std::size_t i = digits; i < digits + 8; ++i) text[i] = static_cast<char>(std::toupper(text[i]));
  EXPECT_NO_THROW(manifest_from_json(text, manifest));
  text[digits] = text[digits] == '0' ? '1' : '0';  // still refused once wrong
  expect_error_mentions([&] { manifest_from_json(text, manifest); }, {"does not match its checksum"});
}

TEST_F(BadCheckpoint, AnotherModelShape) {
  const CheckpointReader r(dir_);
  ModelState wider([] {
    ModelSection m = small_model();
    m.ffn_hidden = 16;
    return m;
  }());
  expect_error_mentions([&] { load_model_state(r, wider.model.params(), *wider.backend, true); },
                        {dir_, "mlp.gate_proj.weight", "another model shape"});
  ModelState deeper(small_model(3));  // every saved tensor fits, one layer is missing
  expect_error_mentions([&] { load_model_state(r, deeper.model.params(), *deeper.backend, true); },
                        {dir_, "model.layers.2"});
  ModelState shallower(small_model(1));  // the checkpoint holds a layer the model lacks
  expect_error_mentions([&] { load_model_state(r, shallower.model.params(), *shallower.backend, true); },
                        {dir_, "model.layers.1", "lacks"});
}

// A one-digit edit of the step would otherwise resume silently into another run.
TEST_F(BadCheckpoint, EditedManifestFailsItsChecksum) {
  const std::string manifest = dir_ + "/manifest.json";
  std::string text = read_text_file(manifest);
  const std::string from = "\"step\": 4";
  ASSERT_NE(text.find(from), std::string::npos);
  text.replace(text.find(from), from.size(), "\"step\": 3");
  write_text_file(manifest, text);
  expect_error_mentions([&] { CheckpointReader r(dir_); }, {manifest, "does not match its checksum", "edited"});
}

TEST_F(BadCheckpoint, ManifestFromBeforeTheChecksumStillReads) {
  const std::string manifest = dir_ + "/manifest.json";
  std::string text = read_text_file(manifest);
  const std::size_t field = text.find(",\n \"manifest_crc32\"");
  ASSERT_NE(field, std::string::npos) << text.substr(text.size() - 200);
  text.erase(field, text.find('\n', field + 2) - field);
  text.replace(text.find("\"format_version\": 2"), 19, "\"format_version\": 1");  // as such manifests were
  write_text_file(manifest, text);
  EXPECT_EQ(CheckpointReader(dir_).manifest().step, 4);
}

TEST_F(BadCheckpoint, StepThatDisagreesWithTheDirectoryName) {
  fs::rename(dir_, root_ + "/step-00000005");
  expect_error_mentions([&] { CheckpointReader r(root_ + "/step-00000005"); },
                        {"says step 4, but its directory is step-00000005"});
}

TEST_F(BadCheckpoint, StepThatDisagreesWithTheRankFiles) {
  // A manifest with a valid checksum but another step, in a directory not named after it.
  const std::string moved = root_ + "/copy";
  fs::rename(dir_, moved);
  CheckpointManifest m = CheckpointReader(moved).manifest();
  m.step = 9;
  m.tokens_seen = 9;
  write_text_file(moved + "/manifest.json", manifest_to_json(m));
  expect_error_mentions([&] { CheckpointReader r(moved); }, {"rank-00000.safetensors was saved at step 4",
                                                             "says step 9"});
}

TEST_F(BadCheckpoint, EachImpossibleValueHasItsOwnMessage) {
  const CheckpointManifest good = CheckpointReader(dir_).manifest();
  const auto refused = [&](const std::function<void(CheckpointManifest&)>& change, const std::string& words) {
    CheckpointManifest m = good;
    change(m);
    expect_error_mentions([&] { manifest_from_json(manifest_to_json(m), "M"); }, {"M: ", words, "damaged"});
  };
  refused([](CheckpointManifest& m) { m.step = -200; }, "step -200 is negative");
  refused([](CheckpointManifest& m) { m.tokens_seen = -1; }, "tokens_seen -1 is negative");
  refused([](CheckpointManifest& m) { m.loss_scale = 0; }, "the loss scale 0 is not");
  refused([](CheckpointManifest& m) { m.lr = -1; }, "the learning rate -1 is not");
  refused([](CheckpointManifest& m) { m.mesh.dp = 0; }, "the process mesh has an extent of 0");
  refused([](CheckpointManifest& m) { m.files.clear(); }, "it lists no rank files");
  refused([](CheckpointManifest& m) { m.files.push_back(m.files[0]); }, "it lists 2 rank files for a mesh of 1");
  refused([](CheckpointManifest& m) { m.files[0].rank = 3; }, "is for rank 3, outside the mesh");
  refused([](CheckpointManifest& m) { m.tensors[0].shape = {-4, 2}; }, "has an impossible shape");
  refused([](CheckpointManifest& m) { m.tensors[0].shape = {std::int64_t{1} << 40, std::int64_t{1} << 40}; },
          "has an impossible shape");
}

TEST(CheckpointReader, RefusesNonFiniteWeightsNamingTheTensor) {
  const std::string root = temp_dir("nan");
  ModelState s(small_model());
  s.randomise(3);
  const ParamPiece piece = s.model.params().held(ParamState::value)[1];
  piece.data.f32()[2] = std::nanf("");
  CheckpointWriter(config_for(root, false), SaveFaults())
      .save(s.model.params(), *s.backend, {2, 0, 0, 0, "", 1.0, {}});
  const CheckpointReader r(root + "/step-00000002");
  ModelState loaded(small_model());
  const std::string name = s.model.params().specs()[static_cast<std::size_t>(piece.param)].name;
  expect_error_mentions([&] { load_model_state(r, loaded.model.params(), *loaded.backend, false); },
                        {"tensor param/" + name, "non-finite", "nan"});
  fs::remove_all(root);
}

// A line torn by a full disk is dropped when the run resumes, with the steps after the
// checkpoint; every line left parses.
TEST(ResumedMetrics, DropsTornLinesAndLaterSteps) {
  const std::string dir = temp_dir("metrics");
  const std::string path = dir + "/metrics.jsonl";
  std::ofstream(path) << "{\"kind\":\"train\",\"step\":1}\n{\"kind\":\"train\",\"step\":2}\n"
                         "{\"kind\":\"train\",\"st\n{\"kind\":\"train\",\"step\":3}\n{\"kind\":\"tra";
  drop_metrics_after(path, 2);
  EXPECT_EQ(read_text_file(path), "{\"kind\":\"train\",\"step\":1}\n{\"kind\":\"train\",\"step\":2}\n");
  fs::remove_all(dir);
}

TEST_F(BadCheckpoint, IncompleteDirectory) {
  fs::remove(dir_ + "/manifest.json");
  expect_error_mentions([&] { CheckpointReader r(dir_); }, {dir_, "not a complete checkpoint"});
}

}  // namespace
}  // namespace ustrain
