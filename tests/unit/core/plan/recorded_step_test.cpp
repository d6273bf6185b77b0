// The planner's seams against the real thing: every rank's training step of the quickstart
// model, run on one process on the recording backend (kernels/record/recording_backend.h)
// over counting groups (parallel/counting_world.h), computes the model's FLOPs formula
// exactly and sends exactly what a real `mpiexec` run's communicators count.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include <unistd.h>

#include <fmt/format.h>

#include "core/recipe/recipe.h"
#include "core/run/resource_usage.h"
#include "core/step/run_schedule.h"
#include "core/step/training_step.h"
#include "kernels/record/recording_backend.h"
#include "parallel/counting_world.h"

namespace ustrain {
namespace {

namespace fs = std::filesystem;

struct Layout {
  int tp = 1, pp = 1, dp = 1, zero = 0;
  std::string schedule = "1f1b";
  int virtual_stages = 1;
};

void PrintTo(const Layout& l, std::ostream* out) {
  *out << fmt::format("tp {} pp {} dp {} zero {} {} x{}", l.tp, l.pp, l.dp, l.zero, l.schedule, l.virtual_stages);
}

// A short step of the quickstart model: 4 sequences of 64 tokens, 2 micro-batches per
// data-parallel rank at dp = 1.
std::vector<std::string> short_step(const Layout& l) {
  return {"train.steps=1",
          "train.micro_batch=2",
          "train.global_batch=4",
          "train.seq_len=64",
          "train.eval_interval=0",
          fmt::format("parallel.tp={}", l.tp),
          fmt::format("parallel.pp={}", l.pp),
          fmt::format("parallel.dp={}", l.dp),
          fmt::format("parallel.zero={}", l.zero),
          fmt::format("parallel.pp_schedule={}", l.schedule),
          fmt::format("parallel.virtual_stages={}", l.virtual_stages)};
}

Recipe quickstart(const std::vector<std::string>& overrides) {
  return load_recipe(std::string(USTRAIN_SOURCE_DIR) + "/recipes/quickstart.toml", overrides);
}

// What one rank's step did, as recorded.
struct RecordedRank {
  int rank = 0;
  bool dp_leader = false;  // data-parallel rank 0: a member of the first model replica
  RecordSummary ops;
  std::size_t reserved = 0, planned = 0;
  std::int64_t tp_bytes = 0, pp_bytes = 0, dp_bytes = 0;  // playbook bytes, as the metrics count them
};

// `device`: the device the step believes it runs on (CUDA: device communicators for groups).
RecordedRank record_step(const Recipe& recipe, int rank, Device device = Device::cpu) {
  const auto& p = recipe.parallel;
  const Mesh mesh(MeshShape{.pp = static_cast<int>(p.pp), .dp = static_cast<int>(p.dp), .cp = static_cast<int>(p.cp),
                            .tp = static_cast<int>(p.tp), .ep = static_cast<int>(p.ep)},
                  rank, static_cast<int>(p.pp * p.dp * p.cp * p.tp));
  const std::unique_ptr<ProcessGroups> groups = counting_process_groups(mesh, device);
  auto backend = std::make_unique<RecordingBackend>(device);
  RecordingBackend& recorder = *backend;
  TrainingRank run(recipe, *groups, std::move(backend), kGradientBucketBytes, MemoryShare{},
                   /*saves_checkpoints=*/false);
  recorder.clear();  // setting up is not the step
  run.gradient_comm().reset_volume();
  run.tp_comm().reset_volume();
  run.pp_comm().reset_volume();

  const auto micro_batches = static_cast<std::size_t>(recipe.grad_accum_steps());
  const std::vector<std::int32_t> tokens(static_cast<std::size_t>(recipe.train.micro_batch * recipe.train.seq_len), 0);
  const std::vector<TokenBatch> micro(micro_batches, TokenBatch{tokens, tokens});
  PhaseTimer timer;
  train_step(run, micro, schedule_of(recipe), 1, timer, nullptr);

  RecordedRank r;
  r.rank = rank;
  r.dp_leader = mesh.coord(MeshDim::dp) == 0;
  r.ops = recorder.summary();
  r.reserved = recorder.reserved_bytes();
  r.planned = run.instance.plan.total_bytes();
  r.tp_bytes = run.tp_comm().volume().playbook_bytes();
  r.pp_bytes = run.pp_comm().volume().playbook_bytes();
  r.dp_bytes = run.gradient_comm().volume().playbook_bytes();
  return r;
}

std::int64_t matmul_flops(const RecordSummary& s) { return s[OpClass::gemm].flops + s[OpClass::attention].flops; }

// The FLOPs one model replica computes in a step, by the model's formula: 6 N + 6 L d S per
// token, over the tokens of one data-parallel rank. Under tensor parallelism the output head
// holds the vocabulary padded to a multiple of tp, and its padding rows take part in the
// head's three GEMMs: 6 d FLOPs per token and padding row more.
std::int64_t formula_flops(const Recipe& recipe) {
  const ModelGeometry whole = geometry_of(recipe, 0, 0);
  const LlamaModel model(recipe.model, whole, 1, Recompute::none);
  const std::int64_t per_token = static_cast<std::int64_t>(model.flops_per_token(recipe.train.seq_len));
  const std::int64_t padding = 6 * (whole.vocab_padded - whole.vocab) * whole.d_model;
  const std::int64_t tokens = recipe.train.global_batch * recipe.train.seq_len / recipe.parallel.dp;
  return (per_token + padding) * tokens;
}

int run_command(const std::string& command, const fs::path& log) {
  const int status = std::system((command + " > " + log.string() + " 2>&1").c_str());
  if (status != 0) {
    std::ifstream in(log);
    std::cerr << in.rdbuf();
  }
  return status;
}

// A byte-level dataset of a few thousand tokens, converted by the binary.
fs::path make_dataset(const fs::path& dir) {
  fs::create_directories(dir / "corpus");
  std::ofstream text(dir / "corpus" / "a.txt");
  for (int i = 0; i < 300; ++i)
    text << fmt::format("document {} says the quick brown fox jumps over {} lazy dogs\n\n", i, i * 7 % 13);
  text.close();
  const fs::path data = dir / "data";
  EXPECT_EQ(run_command(fmt::format("{} data convert --input {} --output {} --val-fraction 0.1", USTRAIN_BINARY,
                                    (dir / "corpus").string(), data.string()),
                        dir / "convert.log"),
            0);
  return data;
}

// The first step's line of a real run's metrics.jsonl, as rank 0 wrote it.
nlohmann::json real_step(const fs::path& dir, const fs::path& data, const std::vector<std::string>& overrides,
                         int ranks, const std::string& name) {
  std::string sets = fmt::format(" --set data.path={} --set run.output_dir={} --set run.name={}", data.string(),
                                 (dir / "runs").string(), name);
  for (const std::string& o : overrides) sets += " --set " + o;
  const std::string command = fmt::format(
      "env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1 "
      "OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 timeout 300 {} -n {} --oversubscribe --allow-run-as-root {} train "
      "{}/recipes/quickstart.toml{}",
      USTRAIN_MPIEXEC, ranks, USTRAIN_BINARY, USTRAIN_SOURCE_DIR, sets);
  EXPECT_EQ(run_command(command, dir / (name + ".log")), 0) << command;
  std::ifstream metrics(dir / "runs" / name / "metrics.jsonl");
  for (std::string line; std::getline(metrics, line);) {
    const nlohmann::json j = nlohmann::json::parse(line);
    if (j.value("kind", "") == "train" && j.value("step", 0.0) == 1.0) return j;
  }
  ADD_FAILURE() << "no step 1 in the metrics of " << name;
  return {};
}

class RecordedStep : public ::testing::TestWithParam<Layout> {};

TEST_P(RecordedStep, FlopsMatchTheFormulaAndBytesMatchARealRun) {
  const Layout layout = GetParam();
  const std::vector<std::string> overrides = short_step(layout);
  const Recipe recipe = quickstart(overrides);
  const int ranks = layout.tp * layout.pp * layout.dp;

  std::vector<RecordedRank> recorded;
  for (int r = 0; r < ranks; ++r) recorded.push_back(record_step(recipe, r));
  std::int64_t replica_flops = 0;
  for (const RecordedRank& r : recorded) {
    std::cout << fmt::format("rank {}: GEMM+attention {} FLOPs; tp {} B, pp {} B, gradients {} B; plan {} reserved "
                             "{}\n{}",
                             r.rank, matmul_flops(r.ops), r.tp_bytes, r.pp_bytes, r.dp_bytes, r.planned, r.reserved,
                             r.ops.text());
    if (r.dp_leader) replica_flops += matmul_flops(r.ops);
    EXPECT_GE(r.reserved, r.planned) << "every planned byte is reserved";
  }
  // A step that believes it runs on a GPU computes and sends the same.
  const RecordedRank on_gpu = record_step(recipe, 0, Device::cuda);
  EXPECT_EQ(matmul_flops(on_gpu.ops), matmul_flops(recorded[0].ops));
  EXPECT_EQ(on_gpu.tp_bytes, recorded[0].tp_bytes);
  EXPECT_EQ(on_gpu.pp_bytes, recorded[0].pp_bytes);
  EXPECT_EQ(on_gpu.dp_bytes, recorded[0].dp_bytes);

  const std::int64_t want = formula_flops(recipe);
  std::cout << fmt::format("one replica: {} FLOPs, formula (with tp padding) {}\n", replica_flops, want);
  EXPECT_EQ(replica_flops, want);

  const fs::path dir = fs::temp_directory_path() /
                       fmt::format("ustrain-recorded-step-{}-{}", ::getpid(), testing::UnitTest::GetInstance()->random_seed());
  fs::remove_all(dir);
  const fs::path data = make_dataset(dir);
  const nlohmann::json real = real_step(dir, data, overrides, ranks, "real");
  ASSERT_FALSE(real.is_null());
  std::cout << fmt::format("real run, rank 0: tp {} B, pp {} B, gradients {} B\n", real["tp_comm_bytes"].get<double>(),
                           real["pp_comm_bytes"].get<double>(), real["dp_comm_bytes"].get<double>());
  EXPECT_EQ(static_cast<double>(recorded[0].tp_bytes), real["tp_comm_bytes"].get<double>());
  EXPECT_EQ(static_cast<double>(recorded[0].pp_bytes), real["pp_comm_bytes"].get<double>());
  EXPECT_EQ(static_cast<double>(recorded[0].dp_bytes), real["dp_comm_bytes"].get<double>());
  fs::remove_all(dir);
}

// A model whose training state alone would take over 100 GiB, on one rank: the step records
// without the memory (the plan is only reserved) and still gives the formula's FLOPs.
TEST(RecordedStepOfALargeModel, NeedsNoMemory) {
  // The high-water mark is the process's, and earlier tests in the same process may have raised
  // it (and left memory resident): writing 5 to clear_refs resets it to the resident set now
  // (Linux 4.0 on), and the step is judged by how far it rises above that.
  std::ofstream("/proc/self/clear_refs") << "5";
  const std::size_t before = current_resident_bytes();
  if (peak_resident_bytes() > before + (std::size_t{64} << 20))
    GTEST_SKIP() << "this kernel does not reset the peak resident set; run the test in a process of its own";
  std::vector<std::string> overrides = short_step(Layout{});
  for (const char* o : {"model.vocab_size=32000", "model.d_model=4096", "model.n_layers=32", "model.n_heads=32",
                        "model.n_kv_heads=32", "model.ffn_hidden=11008", "model.max_seq_len=4096",
                        "train.seq_len=4096", "train.micro_batch=1", "train.global_batch=2"})
    overrides.push_back(o);
  const Recipe recipe = quickstart(overrides);
  const RecordedRank r = record_step(recipe, 0);
  std::cout << fmt::format("plan {}, peak resident {} (before the step {})\n{}", format_bytes(r.planned),
                           format_bytes(peak_resident_bytes()), format_bytes(before),
                           r.ops.text());
  EXPECT_GT(r.planned, std::size_t{100} << 30);
  EXPECT_GE(r.reserved, r.planned);
  EXPECT_LT(std::max(peak_resident_bytes(), before) - before, std::size_t{1} << 30);
  EXPECT_EQ(matmul_flops(r.ops), formula_flops(recipe));
}

// The four layouts of tp and pp in {1, 2}, data parallelism with ZeRO-3, and the pipeline
// schedules whose programs differ most from 1F1B (split backward, several chunks per rank).
INSTANTIATE_TEST_SUITE_P(Quickstart, RecordedStep,
                         ::testing::Values(Layout{1, 1, 1, 0}, Layout{2, 1, 1, 0}, Layout{1, 2, 1, 0},
                                           Layout{2, 2, 1, 0}, Layout{1, 1, 2, 3},
                                           Layout{1, 2, 1, 0, "zero-bubble", 1},
                                           Layout{1, 2, 1, 0, "interleaved", 3}),
                         [](const auto& info) {
                           const Layout& l = info.param;
                           std::string schedule = l.schedule == "1f1b" ? "" : "_" + l.schedule;
                           std::replace(schedule.begin(), schedule.end(), '-', '_');
                           if (l.virtual_stages > 1) schedule += std::to_string(l.virtual_stages);
                           return fmt::format("tp{}_pp{}_dp{}_zero{}{}", l.tp, l.pp, l.dp, l.zero, schedule);
                         });

}  // namespace
}  // namespace ustrain
