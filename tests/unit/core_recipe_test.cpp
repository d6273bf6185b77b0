// Recipes: TOML -> typed, validated Recipe; overrides; error messages; round trip.
#include "core/recipe/recipe.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include "kernels/error.h"
#include "user_error_support.h"

namespace ustrain {
namespace {

const std::string kSource = "test.toml";
// The smallest valid recipe: only data.path has no usable default.
const std::string kMinimal = "[data]\npath = \"shards\"\n";

std::string fixture(const std::string& name) {
  return std::string(USTRAIN_SOURCE_DIR) + "/tests/data/recipes/" + name;
}

Recipe parse(const std::string& text, const std::vector<std::string>& overrides = {}) {
  return parse_recipe(text, kSource, overrides);
}

// The UserError message for a recipe that must be rejected.
std::string error_of(const std::string& text, const std::vector<std::string>& overrides = {}) {
  try {
    parse_recipe(text, kSource, overrides);
  } catch (const UserError& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected a UserError for:\n" << text;
  return "";
}

// ---------------------------------------------------------------------------------------
// Valid recipes

TEST(Recipe, MinimalRecipeKeepsTheStructDefaults) {
  const Recipe r = parse(kMinimal);
  Recipe expected;
  expected.data.path = "shards";
  expected.source = kSource;
  EXPECT_EQ(r, expected);
  EXPECT_EQ(r.model.d_model, 256);
  EXPECT_EQ(r.train.precision, "fp32");
  EXPECT_EQ(r.head_dim(), 32);
  EXPECT_EQ(r.run_dir(), "runs/run");
  // Left to the dataset and the launch (core/recipe/recipe_defaults.h).
  EXPECT_EQ(r.model.vocab_size, 0);
  EXPECT_EQ(r.data.tokenizer, "auto");
  EXPECT_EQ(r.parallel.dp, 0);
  EXPECT_FALSE(r.resolved());
}

TEST(Recipe, FullRecipeFromFileSetsEveryKey) {
  const std::string path = fixture("full.toml");
  const Recipe r = load_recipe(path);
  EXPECT_EQ(r.source, path);
  EXPECT_EQ(r.run.name, "exp-7");
  EXPECT_EQ(r.run.seed, 42u);
  EXPECT_EQ(r.run.output_dir, "outputs");
  EXPECT_EQ(r.run_dir(), "outputs/exp-7");
  EXPECT_EQ(r.model.vocab_size, 512);
  EXPECT_EQ(r.model.d_model, 192);
  EXPECT_EQ(r.model.n_layers, 3);
  EXPECT_EQ(r.model.n_heads, 6);
  EXPECT_EQ(r.model.n_kv_heads, 2);
  EXPECT_EQ(r.model.ffn_hidden, 512);
  EXPECT_EQ(r.model.rope_theta, 500000.0);
  EXPECT_EQ(r.model.norm_eps, 1e-6);
  EXPECT_TRUE(r.model.tied_embeddings);
  EXPECT_EQ(r.model.max_seq_len, 512);
  EXPECT_EQ(r.model.init_std, 0.01);
  EXPECT_EQ(r.data.path, "data/tiny");
  EXPECT_EQ(r.data.tokenizer, "byte");
  EXPECT_EQ(r.train.steps, 200);
  EXPECT_EQ(r.train.micro_batch, 4);
  EXPECT_EQ(r.train.global_batch, 16);
  EXPECT_EQ(r.train.seq_len, 128);
  EXPECT_EQ(r.train.grad_clip, 0.5);
  EXPECT_EQ(r.train.precision, "fp32");
  EXPECT_EQ(r.train.recompute, "selective");
  EXPECT_EQ(r.train.eval_interval, 25);
  EXPECT_EQ(r.train.eval_batches, 2);
  EXPECT_EQ(r.train.max_bad_steps, 3);
  EXPECT_EQ(r.optim.lr, 6e-4);
  EXPECT_EQ(r.optim.beta1, 0.8);
  EXPECT_EQ(r.optim.beta2, 0.99);
  EXPECT_EQ(r.optim.eps, 1e-10);
  EXPECT_EQ(r.optim.weight_decay, 0.05);
  EXPECT_EQ(r.schedule.warmup_steps, 20);
  EXPECT_EQ(r.schedule.decay, "wsd");
  EXPECT_EQ(r.schedule.min_lr, 6e-5);
  EXPECT_EQ(r.schedule.wsd_decay_fraction, 0.25);
  EXPECT_EQ(r.parallel.pp_schedule, "afab");
  EXPECT_EQ(r.checkpoint.interval, 50);
  EXPECT_EQ(r.checkpoint.keep_last, 2);
  EXPECT_EQ(r.log.interval, 5);
  EXPECT_FALSE(r.log.jsonl);
  EXPECT_FALSE(r.log.tensorboard);
  EXPECT_EQ(r.log.level, "debug");
  EXPECT_EQ(r.device.type, "cpu");
  EXPECT_EQ(r.device.threads, 2);
  EXPECT_EQ(r.head_dim(), 32);
  EXPECT_EQ(r.grad_accum_steps(), 4);
}

TEST(Recipe, IntegerIsAcceptedWhereAFloatBelongs) {
  const Recipe r = parse(kMinimal + "[optim]\nlr = 1\n[model]\nrope_theta = 500000\n");
  EXPECT_EQ(r.optim.lr, 1.0);
  EXPECT_EQ(r.model.rope_theta, 500000.0);
}

TEST(Recipe, CudaDeviceMayAskForLowerPrecision) {
  // Whether CUDA is present is the backend factory's question, not the recipe's.
  const Recipe r = parse(kMinimal + "[device]\ntype = \"cuda\"\n[train]\nprecision = \"bf16\"\n");
  EXPECT_EQ(r.device.type, "cuda");
  EXPECT_EQ(r.train.precision, "bf16");
}

// ---------------------------------------------------------------------------------------
// Overrides

TEST(RecipeOverride, EachTypeIsParsedAsTomlAndWinsOverTheFile) {
  const Recipe r = parse(kMinimal + "[train]\nsteps = 10\n",
                         {"train.steps=300", "optim.lr=2.5e-4", "optim.weight_decay=0",
                          "model.tied_embeddings=true", "run.name=\"my run\"",
                          "log.level='warn'"});
  EXPECT_EQ(r.train.steps, 300);
  EXPECT_EQ(r.optim.lr, 2.5e-4);
  EXPECT_EQ(r.optim.weight_decay, 0.0);
  EXPECT_TRUE(r.model.tied_embeddings);
  EXPECT_EQ(r.run.name, "my run");
  EXPECT_EQ(r.log.level, "warn");
}

TEST(RecipeOverride, BareWordIsAString) {
  const Recipe r = parse(kMinimal, {"train.recompute=full", "run.output_dir=out/exp-1",
                                    "data.path=/data/shards v2"});
  EXPECT_EQ(r.train.recompute, "full");
  EXPECT_EQ(r.run.output_dir, "out/exp-1");
  EXPECT_EQ(r.data.path, "/data/shards v2");
}

TEST(RecipeOverride, SpacesAroundTheEqualsSignAreIgnored) {
  const Recipe r = parse(kMinimal, {" train.steps = 7 "});
  EXPECT_EQ(r.train.steps, 7);
}

TEST(RecipeOverride, LaterOverrideWins) {
  const Recipe r = parse(kMinimal, {"train.steps=7", "train.steps=9"});
  EXPECT_EQ(r.train.steps, 9);
}

TEST(RecipeOverride, OverrideCanSupplyTheDataPath) {
  EXPECT_EQ(parse("", {"data.path=shards"}).data.path, "shards");
}

TEST(RecipeOverride, MissingEqualsSign) {
  expect_mentions(error_of(kMinimal, {"train.steps"}),
                  {"--set train.steps", "expected KEY=VALUE"});
}

TEST(RecipeOverride, UnknownKeySuggestsTheNearest) {
  expect_mentions(error_of(kMinimal, {"train.stpes=3"}),
                  {"--set train.stpes=3", "unknown key train.stpes", "did you mean train.steps?"});
}

TEST(RecipeOverride, SectionInsteadOfKey) {
  expect_mentions(error_of(kMinimal, {"model=3"}), {"--set model=3", "[model] is a section", "d_model"});
}

TEST(RecipeOverride, TypeErrorNamesTheOverride) {
  expect_mentions(error_of(kMinimal, {"train.steps=abc"}),
                  {"--set train.steps=abc", "train.steps", "expected integer", "found string \"abc\""});
  expect_mentions(error_of(kMinimal, {"train.steps=1.5"}),
                  {"--set train.steps=1.5", "expected integer", "found float 1.5"});
}

// The shell strips `--set log.trace_steps="10"` to the integer 10: the hint shows the quoting
// that reaches ustrain as a string; a recipe file's hint is TOML.
TEST(RecipeOverride, TypeErrorHintQuotesForTheShell) {
  expect_mentions(error_of(kMinimal, {"log.trace_steps=10"}),
                  {"expected string, found integer 10", "write it like --set 'log.trace_steps=\"10\"'"});
  expect_mentions(error_of(kMinimal, {"train.steps=abc"}), {"write it like --set train.steps="});
  expect_mentions(error_of(kMinimal + "[log]\ntrace_steps = 10\n"), {"write it like log.trace_steps = \"10\""});
}

TEST(RecipeOverride, RangeErrorNamesTheOverride) {
  expect_mentions(error_of(kMinimal, {"optim.beta1=1.5"}),
                  {"--set optim.beta1=1.5", "optim.beta1 = 1.5", "[0, 1)"});
}

TEST(RecipeOverride, BrokenQuotingIsNotTakenAsAWord) {
  expect_mentions(error_of(kMinimal, {"run.name=\"abc"}),
                  {"--set run.name=\"abc", "not a valid TOML value"});
  expect_mentions(error_of(kMinimal, {"run.name=[1, 2"}), {"not a valid TOML value"});
  expect_mentions(error_of(kMinimal, {"run.name=it' # '"}), {"not a valid TOML value"});
  expect_mentions(error_of(kMinimal, {"run.name=a\nb"}), {"neither a TOML value nor a plain word"});
}

TEST(RecipeOverride, OnlyOneValueMayFollowTheEqualsSign) {
  expect_mentions(error_of(kMinimal, {"train.steps=1\ntrain.seq_len=3"}),
                  {"single TOML value"});
}

TEST(RecipeOverride, EmptyValue) {
  expect_mentions(error_of(kMinimal, {"run.name="}), {"--set run.name=", "no value"});
}

TEST(RecipeOverride, CrossFieldErrorPointsAtTheOverride) {
  expect_mentions(error_of(kMinimal, {"train.seq_len=1024"}),
                  {"--set train.seq_len=1024", "train.seq_len = 1024", "model.max_seq_len = 256"});
}

// ---------------------------------------------------------------------------------------
// Errors in the file: one test per kind, checking what the message tells the user

TEST(RecipeError, SyntaxErrorNamesFileLineAndColumn) {
  expect_mentions(error_of(kMinimal + "[model\n"), {"test.toml:3:7: TOML syntax error:"});
}

TEST(RecipeError, UnknownKeySuggestsTheNearest) {
  expect_mentions(error_of(kMinimal + "[model]\nd_modle = 128\n"),
                  {"test.toml:4:", "model.d_modle", "did you mean model.d_model?"});
}

TEST(RecipeError, UnknownKeyInTheWrongSectionSuggestsItsSection) {
  expect_mentions(error_of(kMinimal + "[train]\nlr = 0.1\n"),
                  {"test.toml:4:", "train.lr", "did you mean optim.lr?"});
}

TEST(RecipeError, UnknownKeyFarFromAnyListsTheSectionKeys) {
  const std::string message = error_of(kMinimal + "[model]\nwidth = 128\n");
  expect_mentions(message, {"test.toml:4:", "model.width", "the keys of [model]", "d_model"});
  EXPECT_EQ(message.find("did you mean"), std::string::npos) << message;
}

TEST(RecipeError, TopLevelKeyBelongsInASection) {
  expect_mentions(error_of("name = \"x\"\n" + kMinimal),
                  {"test.toml:1:", "unknown key name", "did you mean run.name?"});
}

TEST(RecipeError, UnknownSectionSuggestsTheNearest) {
  expect_mentions(error_of(kMinimal + "[modle]\nd_model = 128\n"),
                  {"test.toml:3:", "unknown section [modle]", "did you mean [model]?"});
}

TEST(RecipeError, UnknownSectionFarFromAnyListsTheSections) {
  expect_mentions(error_of(kMinimal + "[optimizer_settings]\nlr = 1\n"),
                  {"test.toml:3:", "[optimizer_settings]", "run, model, data"});
}

TEST(RecipeError, FirstProblemInFileOrderIsReported) {
  // toml++ keeps keys sorted by name; the message must follow the file instead.
  expect_mentions(error_of(kMinimal + "[model]\nzz_late = 1\n[device]\naa_later = 2\n"),
                  {"test.toml:4:", "model.zz_late"});
}

TEST(RecipeError, WrongTypeNamesExpectedAndFound) {
  expect_mentions(error_of(kMinimal + "[model]\nd_model = \"wide\"\n"),
                  {"test.toml:4:", "model.d_model", "expected integer", "found string \"wide\""});
  expect_mentions(error_of(kMinimal + "[model]\nd_model = 128.0\n"),
                  {"test.toml:4:", "expected integer", "found float 128.0"});
  expect_mentions(error_of(kMinimal + "[model]\ntied_embeddings = 1\n"),
                  {"model.tied_embeddings", "expected boolean", "found integer 1"});
  expect_mentions(error_of(kMinimal + "[optim]\nlr = \"3e-4\"\n"),
                  {"optim.lr", "expected float", "found string"});
  expect_mentions(error_of(kMinimal + "[run]\nseed = 1979-05-27\n"),
                  {"run.seed", "expected integer", "found a date"});
}

TEST(RecipeError, SectionThatIsNotATable) {
  expect_mentions(error_of("model = 3\n" + kMinimal),
                  {"test.toml:1:", "model must be a section", "found integer 3"});
  expect_mentions(error_of(kMinimal + "[[model]]\nd_model = 128\n"),
                  {"model must be a section", "found an array"});
}

TEST(RecipeError, TableOrArrayWhereAScalarBelongs) {
  expect_mentions(error_of(kMinimal + "[model.d_model]\nvalue = 128\n"),
                  {"test.toml:3:", "model.d_model", "expected integer", "found a table"});
  expect_mentions(error_of(kMinimal + "[model]\nd_model = [128]\n"),
                  {"test.toml:4:", "model.d_model", "expected integer", "found an array"});
  expect_mentions(error_of(kMinimal + "[model]\nd_model = { v = 128 }\n"),
                  {"model.d_model", "found a table"});
}

TEST(RecipeError, NumberOutOfRangeNamesTheRangeAndTheValue) {
  expect_mentions(error_of(kMinimal + "[model]\nd_model = 0\n"),
                  {"test.toml:4:", "model.d_model = 0", ">= 1"});
  expect_mentions(error_of(kMinimal + "[model]\nnorm_eps = 0.0\n"), {"model.norm_eps = 0.0", "> 0"});
  expect_mentions(error_of(kMinimal + "[optim]\nbeta2 = 1.0\n"), {"optim.beta2 = 1.0", "[0, 1)"});
  expect_mentions(error_of(kMinimal + "[optim]\nbeta1 = -0.1\n"), {"optim.beta1 = -0.1", "[0, 1)"});
  expect_mentions(error_of(kMinimal + "[schedule]\nwsd_decay_fraction = 0\n"),
                  {"schedule.wsd_decay_fraction = 0.0", "(0, 1]"});
  expect_mentions(error_of(kMinimal + "[parallel]\nzero = 4\n"), {"parallel.zero = 4", "0 to 3"});
  expect_mentions(error_of(kMinimal + "[run]\nseed = -1\n"), {"run.seed = -1", ">= 0"});
  expect_mentions(error_of(kMinimal + "[train]\ngrad_clip = -1.0\n"), {"train.grad_clip = -1.0", ">= 0"});
  expect_mentions(error_of(kMinimal + "[log]\ninterval = 0\n"), {"log.interval = 0", ">= 1"});
  expect_mentions(error_of(kMinimal + "[device]\nthreads = -2\n"), {"device.threads = -2", ">= 0"});
}

// A deadline below a second only makes healthy ranks ask each other what they are doing; the
// ranks then have 5 s to answer whatever the deadline.
TEST(RecipeError, CommunicationDeadlinesHaveALowerBound) {
  expect_mentions(error_of(kMinimal, {"parallel.comm_timeout_s=0.001"}), {"parallel.comm_timeout_s = 0.001", "[1, 86400]"});
  expect_mentions(error_of(kMinimal, {"parallel.startup_timeout_s=0.5"}), {"parallel.startup_timeout_s = 0.5", "[1, 86400]"});
  EXPECT_EQ(parse(kMinimal, {"parallel.comm_timeout_s=1"}).parallel.comm_timeout_s, 1.0);
}

TEST(RecipeError, NonFiniteFloatsAreRejected) {
  expect_mentions(error_of(kMinimal + "[optim]\nlr = inf\n"), {"test.toml:4:", "optim.lr = inf", "finite"});
  expect_mentions(error_of(kMinimal + "[optim]\nweight_decay = nan\n"),
                  {"optim.weight_decay = nan", "finite"});
}

TEST(RecipeError, ChoiceErrorListsTheChoices) {
  expect_mentions(error_of(kMinimal + "[train]\nprecision = \"fp64\"\n"),
                  {"test.toml:4:", "train.precision = \"fp64\"", "one of: fp32, bf16, fp16, fp8"});
  expect_mentions(error_of(kMinimal + "[schedule]\ndecay = \"exp\"\n"),
                  {"schedule.decay", "one of: cosine, linear, wsd, constant"});
  expect_mentions(error_of(kMinimal + "[train]\nrecompute = \"some\"\n"),
                  {"none, selective, full"});
  expect_mentions(error_of(kMinimal + "[parallel]\npp_schedule = \"gpipe\"\n"),
                  {"afab, 1f1b, interleaved, zero-bubble"});
  expect_mentions(error_of(kMinimal + "[log]\nlevel = \"loud\"\n"),
                  {"trace, debug, info, warn, error"});
  expect_mentions(error_of(kMinimal + "[device]\ntype = \"tpu\"\n"), {"one of: cpu, cuda"});
  expect_mentions(error_of("[data]\npath = \"x\"\ntokenizer = \"gpt2\"\n"),
                  {"test.toml:3:", "data.tokenizer", "one of: auto, byte"});
}

TEST(RecipeError, RunNameMustBeAPlainDirectoryName) {
  for (const std::string bad : {"\"\"", "\".\"", "\"..\"", "\"a/b\"", "\"/abs\""}) {
    expect_mentions(error_of(kMinimal + "[run]\nname = " + bad + "\n"),
                    {"test.toml:4:", "run.name = " + bad, "plain directory name"});
  }
  EXPECT_EQ(parse(kMinimal + "[run]\nname = \"...\"\n").run.name, "...");
}

TEST(RecipeError, RunNameLongerThanADirectoryNameCanBe) {
  const std::string name(300, 'r');
  expect_mentions(error_of(kMinimal + "[run]\nname = \"" + name + "\"\n"),
                  {"test.toml:4:", "run.name", "(302 bytes)", "at most 255 bytes"});
  EXPECT_EQ(parse(kMinimal + "[run]\nname = \"" + std::string(255, 'r') + "\"\n").run.name.size(), 255u);
}

// A megabyte of unknown key once took 101 s (edit distances over the whole key) and was
// echoed back whole.
TEST(RecipeError, HugeUnknownKeyIsAnsweredAtOnceAndShortly) {
  const std::string key(1 << 20, 'k');
  const auto start = std::chrono::steady_clock::now();
  const std::string in_file = error_of(kMinimal + "[train]\n" + key + " = 1\n");
  const std::string in_override = error_of(kMinimal, {"train." + key + "=1"});
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  for (const std::string& m : {in_file, in_override}) {
    expect_mentions(m, {"unknown key train.kkkk", "bytes)"});
    EXPECT_LT(m.size(), 2000u) << m.substr(0, 300);
  }
}

TEST(RecipeError, OutputDirMustNotBeEmpty) {
  expect_mentions(error_of(kMinimal + "[run]\noutput_dir = \"\"\n"),
                  {"run.output_dir", "not empty"});
}

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
  // Big but plannable: whether it fits is the memory check's business (core/memory/memory_fit.h).
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
      {"[train]\nprecision = \"fp8\"\nmicro_batch = 2\n[parallel]\ndp = 2\nzero = 2\n",
       {"train.precision = \"fp8\"", "parallel.zero = 2", "set parallel.zero = 1"}},
  };
  for (const CrossFieldCase& c : cases) {
    SCOPED_TRACE(c.text);
    expect_mentions(error_of(kMinimal + c.text), c.mentions);
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

// ---------------------------------------------------------------------------------------
// Malformed and odd inputs: each is a UserError or a valid recipe, never a crash.

struct OddInput {
  const char* name;
  std::string text;
  bool valid;
};

std::string with_nul(std::string before, std::string after) { return before + '\0' + after; }

TEST(RecipeMalformed, EveryInputIsAUserErrorOrAValidRecipe) {
  const std::string deep_array = "[model]\nd_model = " + std::string(2000, '[') + std::string(2000, ']') + "\n";
  const std::vector<OddInput> inputs = {
      {"truncated table header", "[data", false},
      {"truncated array-of-tables header", "[[data]", false},
      {"empty table header", "[]\n", false},
      {"unterminated string", "[data]\npath = \"shards", false},
      {"unterminated literal string", "[data]\npath = 'shards", false},
      {"unterminated multi-line string", "[data]\npath = \"\"\"shards\n", false},
      {"unknown escape", "[data]\npath = \"a\\qb\"\n", false},
      {"newline inside a string", "[data]\npath = \"a\nb\"\n", false},
      {"duplicate key", "[data]\npath = \"a\"\npath = \"b\"\n", false},
      {"duplicate table", "[data]\npath = \"a\"\n[data]\ntokenizer = \"byte\"\n", false},
      {"table redefined by a dotted key", "[data]\npath = \"a\"\n[model]\nd_model = 128\n[model.d_model]\n", false},
      {"key without value", kMinimal + "[model]\nd_model =\n", false},
      {"key without equals sign", kMinimal + "[model]\nd_model 128\n", false},
      {"value without key", kMinimal + "[model]\n= 128\n", false},
      {"array where a scalar belongs", kMinimal + "[model]\nd_model = [128, 256]\n", false},
      {"unterminated array", kMinimal + "[model]\nd_model = [128\n", false},
      {"inline table as a section", "data = { path = \"shards\" }\n", true},
      {"inline table where a scalar belongs", kMinimal + "[model]\nd_model = { v = 1 }\n", false},
      {"unterminated inline table", "data = { path = \"shards\"\n", false},
      {"integer beyond 64 bits", kMinimal + "[model]\nd_model = 99999999999999999999\n", false},
      {"largest 64-bit seed", kMinimal + "[run]\nseed = 9223372036854775807\n", true},
      {"smallest 64-bit seed", kMinimal + "[run]\nseed = -9223372036854775808\n", false},
      {"hexadecimal integer", kMinimal + "[model]\nd_model = 0x100\n", true},
      {"integer with underscores", kMinimal + "[model]\nd_model = 1_024\n", true},
      {"integer with a leading zero", kMinimal + "[model]\nd_model = 0256\n", false},
      {"float without fraction digits", kMinimal + "[optim]\nlr = 1.\n", false},
      {"float overflowing to infinity", kMinimal + "[optim]\nlr = 1e400\n", false},
      {"nan", kMinimal + "[optim]\nlr = nan\n", false},
      {"negative infinity", kMinimal + "[schedule]\nmin_lr = -inf\n", false},
      {"capitalised boolean", kMinimal + "[model]\ntied_embeddings = True\n", false},
      {"date where an integer belongs", kMinimal + "[run]\nseed = 2024-01-01\n", false},
      {"invalid UTF-8 in a string", "[data]\npath = \"\xff\xfe\"\n", false},
      {"invalid UTF-8 in a comment", kMinimal + "# \xc3\x28\n", false},
      {"NUL byte between lines", with_nul(kMinimal, "\n"), false},
      {"NUL byte in a string", with_nul("[data]\npath = \"a", "b\"\n"), false},
      {"escaped NUL in a string", "[data]\npath = \"a\\u0000b\"\n", false},
      {"empty file (data.path then missing)", "", false},
      {"only comments and blank lines", "# nothing here\n\n   \n", false},
      {"byte order mark", "\xef\xbb\xbf" + kMinimal, true},
      {"CRLF line endings", "[data]\r\npath = \"shards\"\r\n", true},
      {"lone carriage return", "[data]\rpath = \"shards\"\n", false},
      {"dotted keys at top level", "data.path = \"shards\"\nmodel.d_model = 128\n", true},
      {"deeply nested arrays", deep_array, false},
      {"array of tables for a section", kMinimal + "[[run]]\nname = \"x\"\n", false},
      {"quoted key with a dot", kMinimal + "[model]\n\"d_model.x\" = 1\n", false},
      {"unicode key", kMinimal + "[model]\n\"d_mödel\" = 1\n", false},
  };
  ASSERT_GE(inputs.size(), 25u);
  for (const OddInput& input : inputs) {
    SCOPED_TRACE(input.name);
    try {
      parse_recipe(input.text, kSource);
      EXPECT_TRUE(input.valid) << "accepted, but it should be rejected";
    } catch (const UserError& e) {
      EXPECT_FALSE(input.valid) << "rejected: " << e.what();
      EXPECT_EQ(std::string(e.what()).rfind(kSource, 0), 0u) << "does not name the file: " << e.what();
    } catch (const std::exception& e) {
      ADD_FAILURE() << "not a UserError: " << e.what();
    }
  }
}

// ---------------------------------------------------------------------------------------
// to_toml and the reference

TEST(RecipeToToml, DefaultsRoundTripExactly) {
  Recipe r;
  r.data.path = "shards";
  r.source = kSource;
  EXPECT_EQ(parse(to_toml(r)), r);
}

TEST(RecipeToToml, NonDefaultRecipeRoundTripsExactly) {
  Recipe r = load_recipe(fixture("full.toml"));
  r.source = kSource;
  // Floats whose shortest decimal form is long, tiny or huge, and strings that need escapes.
  r.run.seed = static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max());
  r.run.name = "qu\"ote\\back\tslash \xc3\xa9t\xc3\xa9";
  r.run.output_dir = "out dir/with 'single' quotes";
  r.data.path = "C:\\data\\shards";
  r.model.rope_theta = 1e300;
  r.model.norm_eps = 1.0 / 3.0;
  r.model.init_std = 0.1 + 0.2;
  r.optim.lr = 0.1;
  r.optim.beta2 = std::nextafter(1.0, 0.0);
  r.optim.eps = std::numeric_limits<double>::denorm_min();
  r.schedule.min_lr = 0.0;
  r.train.grad_clip = 123456789.0;
  r.log.level = "trace";
  r.device.type = "cuda";
  r.train.precision = "fp16";
  const std::string text = to_toml(r);
  EXPECT_EQ(parse(text), r) << text;
}

TEST(RecipeToToml, EveryKeyIsWrittenWithItsMeaning) {
  Recipe r;
  r.data.path = "shards";
  const std::string text = to_toml(r);
  for (const std::string section :
       {"run", "model", "data", "train", "optim", "schedule", "parallel", "checkpoint", "log",
        "device"}) {
    EXPECT_NE(text.find("\n[" + section + "]"), std::string::npos) << section;
  }
  // A key line carries its value and a comment with meaning and allowed values.
  std::size_t line_start = text.find("\nd_model = 256");
  ASSERT_NE(line_start, std::string::npos) << text;
  const std::string line = text.substr(line_start + 1, text.find('\n', line_start + 1) - line_start - 1);
  expect_mentions(line, {"# ", "width", ">= 1"});
  expect_mentions(text, {"rope_theta = 10000.0", "path = \"shards\"", "tied_embeddings = false",
                         "precision = \"fp32\"", "one of: fp32, bf16, fp16, fp8"});
  // Count key lines: each "name = value" line outside comments has a comment.
  std::size_t key_lines = 0;
  for (std::size_t at = 0; at < text.size();) {
    const std::size_t end = text.find('\n', at);
    const std::string l = text.substr(at, end - at);
    at = end == std::string::npos ? text.size() : end + 1;
    if (l.empty() || l[0] == '#' || l[0] == '[') continue;
    ++key_lines;
    EXPECT_NE(l.find("  # "), std::string::npos) << l;
  }
  // Keys in core/recipe/recipe.h: run 3, model 29, data 5, train 19, optim 9, schedule 4,
  // parallel 15, checkpoint 5, log 5, eval 2, device 3.
  EXPECT_EQ(key_lines, 99u);
}

TEST(RecipeReference, OneMarkdownTablePerSection) {
  const std::string md = recipe_reference_markdown();
  std::size_t tables = 0;
  for (std::size_t at = md.find("| key | type | default | meaning |"); at != std::string::npos;
       at = md.find("| key | type | default | meaning |", at + 1)) {
    ++tables;
  }
  EXPECT_EQ(tables, 11u);
  expect_mentions(md, {"### [model]", "| `model.d_model` | integer | `256` |", ">= 1",
                       "| `train.precision` | string | `\"fp32\"` |", "one of: fp32, bf16, fp16, fp8",
                       "| `optim.lr` | float | `0.0003` |", "| `data.path` | string | `\"\"` |",
                       "| `log.jsonl` | boolean | `true` |"});
}

}  // namespace
}  // namespace ustrain
