// Recipes: TOML -> typed, validated Recipe; overrides; round trip through to_toml.
#include "core/recipe/recipe.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>

#include "tests/unit/core/recipe/recipe_test_support.h"
#include "tests/unit/support/user_error_support.h"

namespace ustrain {
namespace {

using namespace recipe_test;

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
  // parallel 16, checkpoint 5, log 5, eval 2, device 3.
  EXPECT_EQ(key_lines, 100u);
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
