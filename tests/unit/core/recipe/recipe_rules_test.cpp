// The rules that tie a recipe's keys together (batch, layouts, devices, experts) and the recipe
// file itself (missing, a directory, a device, too large).
#include "core/recipe/recipe.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "kernels/error.h"
#include "tests/unit/core/recipe/recipe_test_support.h"
#include "tests/unit/support/user_error_support.h"

namespace ustrain {
namespace {

using namespace recipe_test;

// Rules across keys: each names the keys, their values and what to change.
struct CrossFieldCase {
  std::string text;
  std::vector<std::string> mentions;
};

TEST(RecipeError, CrossFieldRules) {
  const std::vector<CrossFieldCase> cases = {
      {"[model]\nd_model = 250\n",
       {"test.toml:4:", "model.d_model = 250", "not divisible by model.n_heads = 8"}},
      {"[model]\nn_kv_heads = 3\n",
       {"model.n_heads = 8", "not a multiple of model.n_kv_heads = 3"}},
      {"[model]\nn_kv_heads = 16\n",
       {"model.n_kv_heads = 16", "exceeds model.n_heads = 8", "n_kv_heads <= n_heads"}},
      {"[model]\nd_model = 24\n", {"head_dim", "24 / 8 = 3", "odd", "RoPE"}},
      {"[train]\nglobal_batch = 12\n",
       {"train.global_batch = 12", "train.micro_batch * parallel.dp = 8 * 1", "multiple"}},
      {"[train]\nglobal_batch = 4\n", {"train.global_batch = 4", "micro_batch * parallel.dp"}},
      {"[train]\nseq_len = 512\n",
       {"test.toml:4:", "train.seq_len = 512", "exceeds model.max_seq_len = 256"}},
      {"[optim]\nlr = 1e-4\n[schedule]\nmin_lr = 2e-4\n",
       {"schedule.min_lr = 0.0002", "exceeds optim.lr = 0.0001", "min_lr <= lr"}},
      {"[train]\neval_batches = 0\n",
       {"train.eval_batches = 0", "train.eval_interval = 50", "eval_interval = 0"}},
      {"[model]\nrope_scaling = \"llama3\"\nrope_low_freq_factor = 4.0\n",
       {"test.toml:5:", "model.rope_high_freq_factor = 4", "not above model.rope_low_freq_factor = 4"}},
      {"[log]\ntrace_steps = \"10 to 12\"\n",
       {"test.toml:4:", "log.trace_steps = \"10 to 12\" is not a step range", "\"10-12\"", "\"10\""}},
      {"[log]\ntrace_steps = \"0-2\"\n", {"log.trace_steps = \"0-2\"", "steps count from 1"}},
      {"[log]\ntrace_steps = \"12-10\"\n", {"log.trace_steps", "ends before it begins", "\"10-12\""}},
      {"[log]\ntrace_steps = \"99-101\"\n",
       {"log.trace_steps = \"99-101\" reaches past train.steps = 100", "\"99-100\""}},
      {"[log]\ntrace_steps = \"101\"\n", {"log.trace_steps = \"101\" reaches past train.steps = 100", "\"100\""}},
      // Every traced step's spans stay in memory: a cap, with a range that fits it.
      {"[log]\ntrace_steps = \"5-1000000\"\n",
       {"log.trace_steps = \"5-1000000\" traces 999996 steps; at most 20", "\"5-24\""}},
  };
  for (const CrossFieldCase& c : cases) {
    SCOPED_TRACE(c.text);
    expect_mentions(error_of(kMinimal + c.text), c.mentions);
  }
  // Validation may be off with no batches to run it on.
  EXPECT_EQ(parse(kMinimal + "[train]\neval_interval = 0\neval_batches = 0\n").train.eval_batches, 0);
  // A traced range inside the run, a single step, the last step, and nothing.
  EXPECT_EQ(parse(kMinimal + "[log]\ntrace_steps = \"10-12\"\n").log.trace_steps, "10-12");
  EXPECT_EQ(parse(kMinimal + "[log]\ntrace_steps = \"7\"\n").log.trace_steps, "7");
  EXPECT_EQ(parse(kMinimal + "[log]\ntrace_steps = \"100\"\n").log.trace_steps, "100");
  EXPECT_EQ(parse(kMinimal + "[log]\ntrace_steps = \"81-100\"\n").log.trace_steps, "81-100");  // the cap
  EXPECT_EQ(parse(kMinimal).log.trace_steps, "");
}

TEST(RecipeError, ByteTokenizerNeedsItsVocabularyOnceBothAreKnown) {
  expect_mentions(error_of("[data]\npath = \"d\"\ntokenizer = \"byte\"\n[model]\nvocab_size = 100\n"),
                  {"model.vocab_size = 100", "data.tokenizer = \"byte\"", "vocab_size >= 256"});
  // The dataset may be a sentencepiece one: the rule waits until the tokenizer is known.
  EXPECT_EQ(parse(kMinimal + "[model]\nvocab_size = 100\n").model.vocab_size, 100);
  Recipe r = parse(kMinimal + "[model]\nvocab_size = 100\n");
  r.data.tokenizer = "byte";
  expect_mentions([&] {
    try {
      check_recipe(r);
    } catch (const UserError& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  }(), {"test.toml: model.vocab_size = 100", "vocab_size >= 256"});
}

TEST(Recipe, WarmupLongerThanTheRunIsAccepted) {
  // A smoke test of a long recipe (--set train.steps=1): the trainer shortens the warm-up.
  const Recipe r = parse(kMinimal + "[schedule]\nwarmup_steps = 1000\n", {"train.steps=1"});
  EXPECT_EQ(r.schedule.warmup_steps, 1000);
  EXPECT_EQ(r.train.steps, 1);
}

TEST(RecipeError, ModelsBeyondAnyMachineAreRefusedWithTheirNumbers) {
  expect_mentions(error_of(kMinimal + "[model]\nn_layers = 1000000000000\n"),
                  {"test.toml:4:", "model.n_layers = 1000000000000", "must be 1 to 65536"});
  // 2^40 experts: each is a parameter of its own, declared before anything is planned.
  expect_mentions(error_of(kMinimal + "[model]\nn_experts = 1099511627776\nexperts_per_token = 1\n"),
                  {"test.toml:4:", "model.n_experts = 1099511627776", "must be 0 to 65536"});
  expect_error_mentions([] { parse_recipe("[model]\nexperts_per_token = 1\n", kSource, {"model.n_experts=65537"},
                                          RecipeUse::model); },
                        {"model.n_experts = 65537", "must be 0 to 65536"});
  // 2^40-wide embedding rows: the byte counts would pass 2^64 long before anything is planned.
  expect_mentions(error_of(kMinimal + "[model]\nvocab_size = 4611686018427387904\nd_model = 1099511627776\n"
                                      "n_heads = 1\nn_kv_heads = 1\n"),
                  {"test.toml:", "vocabulary of 4611686018427387904", "parameters", "more than any machine has"});
  expect_mentions(error_of(kMinimal + "[train]\nmicro_batch = 4611686018427387904\nglobal_batch = "
                                      "4611686018427387904\n[model]\nvocab_size = 300\n"),
                  {"micro-batch of 4611686018427387904 x 256 tokens", "more than any machine has"});
  // Big but plannable: whether it fits is the memory check's business (core/step/memory_fit.h).
  EXPECT_EQ(parse(kMinimal + "[model]\nd_model = 65536\nn_heads = 64\nn_layers = 1000\n").model.n_layers, 1000);
}

TEST(RecipeError, HugeBatchProductDoesNotOverflow) {
  expect_mentions(error_of(kMinimal + "[train]\nmicro_batch = 4611686018427387904\n[parallel]\n"
                                      "dp = 4\n"),
                  {"train.global_batch = 8", "multiple"});
}

TEST(RecipeError, MissingDataPathSaysHowToMakeOne) {
  expect_mentions(error_of("[model]\nd_model = 128\n"),
                  {"test.toml", "data.path is not set", "ustrain data convert"});
}

// A model's description (ckpt import, a checkpoint's saved recipe) needs no data and no
// training settings that fit it.
TEST(Recipe, AModelDescriptionNeedsNoData) {
  const Recipe r = parse_recipe("[model]\nd_model = 128\nmax_seq_len = 32\nvocab_size = 100\n", kSource, {},
                                RecipeUse::model);
  EXPECT_EQ(r.model.d_model, 128);
  EXPECT_TRUE(r.data.path.empty());
  EXPECT_EQ(r.train.seq_len, 256);  // longer than the model's context: no run reads it
  // The model's own rules still hold, and so does what this build supports.
  EXPECT_THROW(parse_recipe("[model]\nd_model = 250\n", kSource, {}, RecipeUse::model), UserError);
  EXPECT_THROW(parse_recipe("[model]\nn_experts = 8\n[train]\nprecision = \"fp8\"\n[device]\ntype = \"cuda\"\n", kSource,
                           {}, RecipeUse::model),
               UserError);
}

TEST(Recipe, RopeScalingKeys) {
  const Recipe plain = parse(kMinimal);
  EXPECT_EQ(plain.model.rope_scaling, "none");
  const Recipe r = parse(kMinimal + "[model]\nrope_scaling = \"llama3\"\nrope_scaling_factor = 32.0\n"
                                    "rope_low_freq_factor = 1.0\nrope_high_freq_factor = 4.0\n"
                                    "rope_original_max_seq_len = 8192\n");
  EXPECT_EQ(r.model.rope_scaling, "llama3");
  EXPECT_EQ(r.model.rope_scaling_factor, 32.0);
  EXPECT_EQ(r.model.rope_original_max_seq_len, 8192);
  EXPECT_EQ(parse_recipe(to_toml(r), kSource), r);
  // Without scaling the factors are not used, so they are not checked against each other.
  EXPECT_NO_THROW(parse(kMinimal + "[model]\nrope_low_freq_factor = 9.0\n"));
  expect_mentions(error_of(kMinimal + "[model]\nrope_scaling = \"yarn\"\n"), {"model.rope_scaling", "llama3"});
}

TEST(Recipe, DataParallelLayoutsAreAccepted) {
  const Recipe r = parse("[data]\npath = \"d\"\n[parallel]\ndp = 2\n[train]\nmicro_batch = 4\nglobal_batch = 16\n");
  EXPECT_EQ(r.parallel.dp, 2);
  EXPECT_EQ(r.grad_accum_steps(), 2);
}

TEST(Recipe, Fp8KeysParse) {
  const Recipe r = parse("[data]\npath = \"d\"\n[train]\nprecision = \"fp8\"\nfp8_recipe = \"blockwise\"\n"
                         "fp8_grad_format = \"e4m3\"\nfp8_amax_history = 16\nfp8_margin = 1\n");
  EXPECT_EQ(r.train.fp8_recipe, "blockwise");
  EXPECT_EQ(r.train.fp8_grad_format, "e4m3");
  EXPECT_EQ(r.train.fp8_amax_history, 16);
  EXPECT_EQ(r.train.fp8_margin, 1);
  EXPECT_EQ(parse("[data]\npath = \"d\"\n[train]\nprecision = \"fp8\"\n").train.fp8_recipe, "delayed");
  expect_mentions(error_of(kMinimal + "[train]\nfp8_recipe = \"tensorwise\"\n"),
                  {"train.fp8_recipe", "one of: delayed, current, rowwise, blockwise"});
}

TEST(Recipe, HybridShardingOverADivisorOfDp) {
  const std::string layout = "[data]\npath = \"d\"\n[train]\nmicro_batch = 2\n[parallel]\ndp = 4\n";
  EXPECT_EQ(parse(layout + "zero = 1\ndp_shard = 2\n").parallel.shard_dp(), 2);
  EXPECT_EQ(parse(layout + "zero = 0\ndp_shard = 4\n").parallel.shard_dp(), 4);  // all of dp: ZeRO as usual
  EXPECT_EQ(parse(layout + "zero = 0\n").parallel.shard_dp(), 4);
  expect_mentions(error_of(layout + "zero = 1\ndp_shard = 3\n"),
                  {"parallel.dp_shard = 3 does not divide parallel.dp = 4", "divisor of dp"});
  expect_mentions(error_of(layout + "zero = 0\ndp_shard = 2\n"),
                  {"parallel.dp_shard = 2 with parallel.zero = 0", "set parallel.zero to 1, 2 or 3"});
  expect_mentions(error_of(layout + "zero = 1\ndp_shard = -1\n"), {"parallel.dp_shard"});
  // With dp left to the launch the rules wait for it.
  EXPECT_EQ(parse("[data]\npath = \"d\"\n[parallel]\nzero = 0\ndp_shard = 3\n").parallel.dp_shard, 3);
}

TEST(Recipe, EveryZeroStageIsAccepted) {
  for (int stage = 0; stage <= 3; ++stage)
    EXPECT_EQ(parse("[data]\npath = \"d\"\n[parallel]\nzero = " + std::to_string(stage) + "\n").parallel.zero, stage);
}

TEST(RecipeError, NotSupportedByThisBuildYet) {
  const std::vector<CrossFieldCase> cases = {
      {"[parallel]\nep = 4\n", {"parallel.ep = 4", "expert parallelism", "set parallel.ep = 1"}},
      {"[parallel]\ndp = 4\nep = 4\n[train]\nmicro_batch = 2\n", {"parallel.ep = 4", "expert parallelism", "set parallel.ep = 1"}},
      {"[model]\nn_experts = 8\n[train]\nprecision = \"fp8\"\n[device]\ntype = \"cuda\"\n",
       {"train.precision = \"fp8\"", "device.type = \"cuda\"", "dense models only", "set model.n_experts = 0"}},
      {"[train]\nprecision = \"fp8\"\nseq_len = 100\nmicro_batch = 1\n[device]\ntype = \"cuda\"\n",
       {"train.precision = \"fp8\"", "multiples of 16", "train.micro_batch * train.seq_len / parallel.cp is 100"}},
  };
  for (const CrossFieldCase& c : cases) {
    SCOPED_TRACE(c.text);
    expect_mentions(error_of(kMinimal + c.text), c.mentions);
  }
}

TEST(Recipe, Fp8IsAcceptedAtEveryZeroStage) {
  for (int zero = 0; zero <= 3; ++zero) {
    const Recipe r = parse(kMinimal + "[train]\nprecision = \"fp8\"\nmicro_batch = 2\n[parallel]\ndp = 2\nzero = " +
                           std::to_string(zero) + "\n");
    EXPECT_EQ(r.parallel.zero, zero);
  }
}

TEST(Recipe, SeveralRanksOnGpusAreAcceptedWithEitherDeviceCommunicator) {
  for (const char* comm : {"auto", "nccl", "staged"}) {
    const Recipe r = parse(kMinimal + "[device]\ntype = \"cuda\"\n[parallel]\ndp = 2\ntp = 2\npp = 2\ndevice_comm = \"" +
                           comm + "\"\n[train]\nglobal_batch = 16\n");
    EXPECT_EQ(r.parallel.device_comm, comm);
  }
  expect_mentions(error_of(kMinimal + "[parallel]\ndevice_comm = \"mpi\"\n"),
                  {"parallel.device_comm", "auto", "nccl", "staged"});
}

TEST(RecipeError, ExpertParallelismMustDivideDataTimesContextParallelism) {
  // ep borrows its ranks from dp x cp: that rule is told first, then what the model needs.
  const std::string batch = "[train]\nmicro_batch = 1\nglobal_batch = 12\n";
  const std::string moe = "[model]\nn_experts = 8\n";
  const std::vector<CrossFieldCase> cases = {
      {"[parallel]\ndp = 2\nep = 4\n",
       {"parallel.ep = 4 does not divide parallel.dp * parallel.cp = 2 * 1 = 2", "choose an ep that divides dp * cp"}},
      {"[parallel]\ndp = 4\nep = 3\n", {"parallel.ep = 3 does not divide parallel.dp * parallel.cp = 4 * 1 = 4"}},
      {"[parallel]\ndp = 3\ncp = 2\nep = 4\n", {"parallel.ep = 4 does not divide parallel.dp * parallel.cp = 3 * 2 = 6"}},
      // Divisible: then a dense model has no experts to place.
      {"[parallel]\ndp = 4\nep = 2\n", {"parallel.ep = 2 with a dense model", "set parallel.ep = 1"}},
      // With dp unset the rule waits for the launch (core/recipe/recipe_defaults.h).
      {"[parallel]\nep = 3\n", {"parallel.ep = 3 with a dense model"}},
      // An MoE model whose experts do not split over ep.
      {moe + "[parallel]\ndp = 3\ncp = 2\nep = 6\n",
       {"model.n_experts = 8 does not divide over parallel.ep = 6 ranks", "choose an ep that divides n_experts"}},
      // Under tensor parallelism the tp ranks dispatch different rows: sequence parallelism on.
      {moe + "[parallel]\ndp = 2\ntp = 2\nep = 2\nsp = false\n",
       {"parallel.ep = 2 with parallel.tp = 2 runs with sequence parallelism only", "set parallel.sp = true"}},
  };
  for (const CrossFieldCase& c : cases) {
    SCOPED_TRACE(c.text);
    expect_mentions(error_of(kMinimal + batch + c.text), c.mentions);
  }
  EXPECT_EQ(parse(kMinimal + batch + moe + "[parallel]\ndp = 4\nep = 4\n").parallel.ep, 4);
  const std::string huge = "[parallel]\ndp = 4611686018427387904\ncp = 4\nep = 3\n";  // dp * cp overflows
  expect_mentions(error_of(kMinimal + "[train]\nmicro_batch = 1\nglobal_batch = 4611686018427387904\n" + huge),
                  {"parallel.ep = 3 does not divide parallel.dp * parallel.cp = 4611686018427387904 * 4;"});
}

TEST(RecipeError, ContextParallelismSplitsSequencesIntoTwoChunksPerRank) {
  const std::vector<CrossFieldCase> cases = {
      {"[parallel]\ncp = 3\n[train]\nseq_len = 64\n",
       {"train.seq_len = 64 is not divisible by 2 * parallel.cp = 6", "make seq_len a multiple of 6"}},
      {"[parallel]\ncp = 4\ntp = 2\nsp = true\n[train]\nseq_len = 20\n",
       {"train.seq_len = 20 is not divisible by 2 * parallel.cp = 8"}},
      {"[parallel]\ncp = 2\ntp = 4\nsp = true\n[train]\nseq_len = 12\n",
       {"train.seq_len / parallel.cp = 12 / 2 = 6 tokens per context-parallel rank is not divisible by parallel.tp = 4",
        "a multiple of cp * tp = 8"}},
  };
  for (const CrossFieldCase& c : cases) {
    SCOPED_TRACE(c.text);
    expect_mentions(error_of(kMinimal + c.text), c.mentions);
  }
  const Recipe r = parse(kMinimal + "[parallel]\ncp = 4\ntp = 2\nsp = true\n[train]\nseq_len = 32\n");
  EXPECT_EQ(r.parallel.cp, 4);
}

TEST(RecipeError, CrossFieldRulesComeBeforeSupportChecks) {
  // Fix what is wrong before being told what is missing.
  expect_mentions(error_of(kMinimal + "[parallel]\npp = 2\n[model]\nd_model = 250\n"),
                  {"model.d_model = 250"});
}

TEST(RecipeError, PipelineLayoutsTheScheduleCannotRunAreRefused) {
  // The default model has 4 layers; global_batch 8 with micro_batch 8 is one micro-batch.
  const std::vector<CrossFieldCase> cases = {
      {"[parallel]\npp = 3\n", {"model.n_layers = 4 is not divisible by parallel.pp * parallel.virtual_stages = 3 * 1"}},
      {"[parallel]\npp = 2\nvirtual_stages = 4\n", {"= 2 * 4 = 8", "whose product divides n_layers"}},
      {"[parallel]\npp = 2\nvirtual_stages = 2\n",
       {"parallel.virtual_stages = 2 needs parallel.pp_schedule = \"interleaved\""}},
      {"[parallel]\npp = 2\nvirtual_stages = 2\npp_schedule = \"interleaved\"\ndp = 1\n[train]\nmicro_batch = 8\n",
       {"must be a multiple of 2", "micro-batches per step = train.global_batch / (train.micro_batch * parallel.dp) = 8 / (8 * 1)"}},
      {"[parallel]\npp_schedule = \"interleaved\"\nvirtual_stages = 2\n[train]\nmicro_batch = 1\n",
       {"needs parallel.pp >= 2"}},
      {"[parallel]\npp = 2\npp_schedule = \"zero-bubble\"\nzero = 2\ndp = 2\n[train]\nglobal_batch = 16\n",
       {"parallel.zero = 2", "set parallel.zero to 0 or 1"}},
      {"[parallel]\npp = 2\npp_schedule = \"zero-bubble\"\n[train]\nrecompute = \"full\"\n",
       {"train.recompute = \"full\"", "set train.recompute = \"none\""}},
  };
  for (const CrossFieldCase& c : cases) {
    SCOPED_TRACE(c.text);
    expect_mentions(error_of(kMinimal + c.text), c.mentions);
  }
  EXPECT_EQ(parse_recipe(kMinimal + "[parallel]\npp = 2\nvirtual_stages = 2\npp_schedule = \"interleaved\"\n"
                                    "[train]\nmicro_batch = 2\n",
                         "test.toml")
                .parallel.virtual_stages,
            2);
}

TEST(RecipeError, TensorParallelismNeedsDivisibleHeadsAndWidths) {
  // The default model: 8 heads, 4 kv heads, ffn 768, seq_len 256.
  const std::vector<CrossFieldCase> cases = {
      {"[parallel]\ntp = 3\n", {"model.n_heads = 8 is not divisible by parallel.tp = 3", "choose a tp that divides"}},
      {"[parallel]\ntp = 8\n", {"model.n_kv_heads = 4 is not divisible by parallel.tp = 8"}},
      {"[parallel]\ntp = 2\n[model]\nffn_hidden = 769\n", {"model.ffn_hidden = 769 is not divisible by parallel.tp = 2"}},
      {"[parallel]\ntp = 4\n[train]\nseq_len = 250\n",
       {"train.seq_len = 250 is not divisible by parallel.tp = 4", "parallel.sp = false"}},
  };
  for (const CrossFieldCase& c : cases) {
    SCOPED_TRACE(c.text);
    expect_mentions(error_of(kMinimal + c.text), c.mentions);
  }
  // Without sequence parallelism any seq_len works, and an odd vocabulary is padded.
  EXPECT_EQ(parse_recipe(kMinimal + "[parallel]\ntp = 4\nsp = false\n[train]\nseq_len = 250\n", "test.toml")
                .parallel.tp,
            4);
  EXPECT_EQ(parse_recipe(kMinimal + "[parallel]\ntp = 2\n[model]\nvocab_size = 257\n", "test.toml").model.vocab_size,
            257);
}

TEST(RecipeError, ExpertBalancingNeedsExpertsToBalance) {
  expect_mentions(error_of(kMinimal, {"model.router_seq_aux_loss=0.01"}),
                  {"expert balancing needs experts", "model.n_experts > 0"});
  expect_mentions(error_of(kMinimal, {"model.n_experts=4", "model.experts_per_token=4",
                                      "model.router_bias_update_rate=0.001"}),
                  {"every token goes to every expert", "model.router_bias_update_rate"});
  expect_mentions(error_of(kMinimal, {"model.n_experts=4", "model.router_bias_update_rate=-0.1"}),
                  {"model.router_bias_update_rate"});
  const Recipe r = parse(kMinimal, {"model.n_experts=4", "model.router_seq_aux_loss=0.001",
                                    "model.router_bias_update_rate=0.001"});
  EXPECT_DOUBLE_EQ(r.model.router_seq_aux_loss, 0.001);
  EXPECT_DOUBLE_EQ(r.model.router_bias_update_rate, 0.001);
}

TEST(RecipeError, MissingFileNamesThePath) {
  const std::string path = fixture("does-not-exist.toml");
  try {
    load_recipe(path);
    FAIL() << "expected a UserError";
  } catch (const UserError& e) {
    expect_mentions(e.what(), {path, "cannot open"});
  }
}

// `ustrain train /dev/zero` read without end; a device is no recipe file.
TEST(RecipeError, ADeviceIsRefusedWithoutReadingIt) {
  expect_error_mentions([] { load_recipe("/dev/zero"); }, {"/dev/zero is a device file, not a regular file"});
}

TEST(RecipeError, HugeFileIsRefusedAfterSixteenMebibytes) {
  const std::string path = testing::TempDir() + "/huge-recipe.toml";
  std::ofstream(path).close();
  std::filesystem::resize_file(path, std::uintmax_t{17} << 20);  // sparse: takes no disk
  expect_error_mentions([&] { load_recipe(path); }, {path, "larger than 16 MiB"});
  std::filesystem::remove(path);
}

TEST(RecipeError, DirectoryInsteadOfFile) {
  const std::string path = fixture("");
  try {
    load_recipe(path);
    FAIL() << "expected a UserError";
  } catch (const UserError& e) {
    expect_mentions(e.what(), {path, "is a directory"});
  }
}

TEST(RecipeError, FileErrorsNameTheFileAndOverridesApply) {
  const std::string path = fixture("full.toml");
  EXPECT_EQ(load_recipe(path, {"train.steps=70"}).train.steps, 70);
  try {
    load_recipe(path, {"model.n_heads=10"});
    FAIL() << "expected a UserError";
  } catch (const UserError& e) {
    // The override is the latest change to the two keys, so the message points at it.
    expect_mentions(e.what(), {"--set model.n_heads=10", "model.d_model = 192",
                               "model.n_heads = 10"});
  }
}

}  // namespace
}  // namespace ustrain
