// Errors in a recipe file's keys and values: one test per kind, checking what the message tells
// the user (file, line, the key, what is allowed).
#include "core/recipe/recipe.h"

#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

#include "tests/unit/core/recipe/recipe_test_support.h"
#include "tests/unit/support/user_error_support.h"

namespace ustrain {
namespace {

using namespace recipe_test;

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

}  // namespace
}  // namespace ustrain
