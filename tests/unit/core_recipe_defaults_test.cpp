// What a recipe leaves to the dataset (model.vocab_size, data.tokenizer) and to the launch
// (parallel.dp) is filled in from them; what it sets must agree with them.
#include "core/recipe/recipe_defaults.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "data/convert.h"
#include "kernels/error.h"
#include "user_error_support.h"

namespace ustrain {
namespace {

namespace fs = std::filesystem;

ProcessInfo launched(int world, const char* launcher = "mpirun") {
  ProcessInfo p;
  p.world_size = p.local_world_size = world;
  p.launcher = launcher;
  return p;
}

Recipe parse(const std::vector<std::string>& overrides) {
  return parse_recipe("[data]\npath = \"d\"\n[train]\nmicro_batch = 2\nglobal_batch = 8\n", "r.toml", overrides);
}

// A byte-tokenized dataset of a few hundred documents (vocabulary 257 with the EOS).
class DatasetDefaults : public testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("ustrain_defaults_" + std::to_string(::getpid()) + "_" +
                                        testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    {
      std::ofstream text(dir_ / "corpus.txt");
      for (int i = 0; i < 300; ++i) text << "document " << i << " says something about the number " << i * 7 << "\n\n";
    }
    ConvertOptions o;
    o.format = "text";
    o.inputs = {(dir_ / "corpus.txt").string()};
    o.output_dir = data_dir();
    o.val_fraction = 0.2;
    convert_dataset(o);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string data_dir() const { return (dir_ / "data").string(); }
  // The test's overrides come last and win.
  Recipe recipe(const std::vector<std::string>& overrides = {}) const {
    std::vector<std::string> all = {"data.path=" + data_dir(), "train.seq_len=32", "model.max_seq_len=32"};
    all.insert(all.end(), overrides.begin(), overrides.end());
    return parse(all);
  }

  fs::path dir_;
};

TEST_F(DatasetDefaults, UnsetKeysTakeTheManifests) {
  DatasetFacts facts;
  const Recipe r = with_dataset_defaults(recipe(), &facts);
  EXPECT_EQ(r.model.vocab_size, 257);
  EXPECT_EQ(r.data.tokenizer, "byte");
  EXPECT_EQ(facts.datasets, 1);
  EXPECT_EQ(facts.tokenizer.kind, "byte");
  EXPECT_GT(facts.train_tokens, 0);
  EXPECT_GT(facts.validation_tokens, 0);
  // Resolving again changes nothing.
  EXPECT_EQ(with_dataset_defaults(r), r);
  const std::vector<std::string> filled = filled_defaults(recipe(), r);
  ASSERT_EQ(filled.size(), 2u);
  expect_mentions(filled[0], {"data.tokenizer = \"byte\"", "the dataset's"});
  expect_mentions(filled[1], {"model.vocab_size = 257", "the dataset's"});
}

TEST_F(DatasetDefaults, SetKeysMustAgree) {
  // A larger vocabulary is fine (the head has unused rows); a smaller one, or another kind, is not.
  EXPECT_EQ(with_dataset_defaults(recipe({"model.vocab_size=512"})).model.vocab_size, 512);
  expect_mentions(user_error_of([&] { with_dataset_defaults(recipe({"model.vocab_size=100", "data.tokenizer=external"})); }),
                  {"tokenized with byte", "data.tokenizer = \"external\"", "set data.tokenizer = \"byte\""});
  expect_mentions(user_error_of([&] { with_dataset_defaults(recipe({"model.vocab_size=200"})); }),
                  {"vocabulary of 257 tokens but model.vocab_size = 200", "at least 257"});
}

TEST(DocumentMask, NeedsTheDatasetsEndOfDocumentToken) {
  TokenizerIdentity ids{"external", "gpt2", 50257, -1, "", ""};
  const Recipe masked = parse({"train.document_mask=true"});
  expect_mentions(user_error_of([&] { check_dataset_tokenizers(masked, {{"ids", ids}}); }),
                  {"train.document_mask = true", "dataset ids", "--eos-id", "train.document_mask = false"});
  EXPECT_NO_THROW(check_dataset_tokenizers(parse({}), {{"ids", ids}}));  // unmasked: no EOS needed
  ids.eos_id = 50256;
  EXPECT_NO_THROW(check_dataset_tokenizers(masked, {{"ids", ids}}));
}

TEST_F(DatasetDefaults, MissingOrShortDataIsReportedWithoutTraining) {
  expect_mentions(user_error_of([&] { with_dataset_defaults(parse({"data.path=" + data_dir() + "-missing"})); }),
                  {data_dir() + "-missing"});
  const Recipe long_sequences = recipe({"model.max_seq_len=100000", "train.seq_len=100000"});
  expect_mentions(user_error_of([&] { with_dataset_defaults(long_sequences); }),
                  {"fewer than one sequence of 100000 + 1", "train.seq_len"});
}

TEST(LaunchDefaults, DataParallelIsTheProcessesOverTheOtherDimensions) {
  EXPECT_EQ(with_launch_defaults(parse({}), launched(1, "none")).parallel.dp, 1);
  EXPECT_EQ(with_launch_defaults(parse({}), launched(4)).parallel.dp, 4);
  EXPECT_EQ(with_launch_defaults(parse({"parallel.tp=2", "model.max_seq_len=256"}), launched(4)).parallel.dp, 2);
  // A value the recipe sets stays: the launch check (the mesh) says when it does not fit.
  EXPECT_EQ(with_launch_defaults(parse({"parallel.dp=2"}), launched(8)).parallel.dp, 2);
  const Recipe resolved = with_launch_defaults(parse({"parallel.tp=2"}), launched(8, "srun"));
  const std::vector<std::string> filled = filled_defaults(parse({"parallel.tp=2"}), resolved);
  ASSERT_EQ(filled.size(), 1u);
  expect_mentions(filled[0], {"parallel.dp = 4: 8 processes launched, divided by tp * pp * cp = 2"});
}

TEST(LaunchDefaults, ALaunchThatDoesNotDivideSaysWhatToLaunch) {
  expect_mentions(user_error_of([&] { with_launch_defaults(parse({"parallel.tp=4"}), launched(6, "srun")); }),
                  {"parallel.dp is unset", "tp * pp * cp = 4 * 1 * 1 = 4", "srun started 6 processes",
                   "set parallel.dp"});
  expect_mentions(user_error_of([&] { with_launch_defaults(parse({"parallel.tp=2"}), launched(1, "none")); }),
                  {"one process without a launcher", "mpirun -n N", "a multiple of 2"});
  // The derived dp must still satisfy the batch rule, and the message says it was derived.
  expect_mentions(user_error_of([&] { with_launch_defaults(parse({}), launched(3)); }),
                  {"train.global_batch = 8", "2 * 3",
                   "values the recipe leaves unset: parallel.dp = 3 from the 3 processes launched"});
}

TEST(LaunchDefaults, ADryRunWithoutALauncherPlansTheLaunchTheLayoutNeeds) {
  const ProcessInfo one = launched(1, "none");
  EXPECT_EQ(dry_run_launch(parse({"parallel.tp=2"}), one).world_size, 2);
  EXPECT_EQ(with_launch_defaults(parse({"parallel.tp=2"}), dry_run_launch(parse({"parallel.tp=2"}), one)).parallel.dp,
            1);
  EXPECT_EQ(dry_run_launch(parse({"parallel.dp=2"}), one).world_size, 2);  // set: the launch it needs
  EXPECT_EQ(dry_run_launch(parse({"parallel.dp=2", "parallel.tp=2"}), one).local_world_size, 4);  // on this host
  EXPECT_EQ(dry_run_launch(parse({}), launched(4)).world_size, 4);         // launched: as it is
}

}  // namespace
}  // namespace ustrain
