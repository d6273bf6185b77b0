// The tokenizer a checkpoint keeps: written with the manifest and covered by its checksum, read
// back without the dataset; a damaged or missing model is reported; checkpoints written before
// they kept one still load and find it through their recipe's dataset.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <string>

#include "core/checkpoint/format.h"
#include "core/checkpoint/reader.h"
#include "core/checkpoint/tokenizer.h"
#include "core/checkpoint/writer.h"
#include "core/model/llama.h"
#include "data/convert/convert.h"
#include "data/convert/tokenizer_training.h"
#include "kernels/error.h"
#include "tests/unit/support/user_error_support.h"

namespace ustrain {
namespace {

namespace fs = std::filesystem;

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

class CheckpointTokenizer : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("ustrain_ckpt_tok_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "corpus");
    std::ofstream corpus(dir_ / "corpus/a.txt");
    const char* syllables[] = {"ka", "lo", "mi", "ne", "ru", "sa", "ti", "vo", "ze", "pa", "qu", "xi"};
    for (int line = 0; line < 400; ++line) {
      for (int w = 0; w < 8; ++w)
        corpus << syllables[(line * 7 + w) % 12] << syllables[(line + w * 5) % 12] << ' ';
      corpus << "\n\n";
    }
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }

  std::string train_model() const {
    TokenizerTrainOptions options;
    options.inputs = {path("corpus")};
    options.output = path("tok.model");
    options.vocab_size = 300;
    train_tokenizer(options);
    return options.output;
  }
  // A dataset converted with `tokenizer` ("byte" or a .model file).
  std::string convert(const std::string& tokenizer, const std::string& name) const {
    ConvertOptions options;
    options.format = "text";
    options.inputs = {path("corpus")};
    options.output_dir = path(name);
    options.tokenizer = tokenizer;
    options.val_fraction = 0.1;
    convert_dataset(options);
    return options.output_dir;
  }

  // Saves step 1 of a small model with `recipe` and, when given, `tokenizer`; returns its path.
  std::string save(const std::string& recipe, const std::optional<TokenizerSnapshot>& tokenizer,
                   const std::string& name = "run") const {
    ModelSection m;
    m.vocab_size = 300;
    m.d_model = 8;
    m.n_layers = 1;
    m.n_heads = 2;
    m.n_kv_heads = 1;
    m.ffn_hidden = 8;
    m.max_seq_len = 4;
    auto backend = make_backend(Device::cpu, 1);
    LlamaModel model(m, 1, 4, Recompute::none);
    MemoryPlan plan;
    model.plan(plan);
    PlannedMemory memory(plan, *backend);
    model.bind(memory, *backend);
    CheckpointWriterConfig c;
    c.root = path(name);
    c.async = false;
    c.recipe_toml = recipe;
    c.ustrain_version = "test";
    c.tokenizer = tokenizer;
    CheckpointWriter(c, SaveFaults()).save(model.params(), *backend, {1, 0, 0, 0, "", 1.0, {}});
    return path(name) + "/step-00000001";
  }

  fs::path dir_;
};

TEST_F(CheckpointTokenizer, KeptInTheCheckpointAndReadWithoutTheDataset) {
  const std::string model = train_model();
  const std::string original = slurp(model);
  const std::string ckpt = save("[data]\ntokenizer = \"sentencepiece\"\npath = \"gone\"\n", model_file_snapshot(model));
  fs::remove(model);

  const CheckpointReader reader(ckpt);
  ASSERT_TRUE(reader.manifest().tokenizer.has_value());
  const TokenizerIdentity& kept = *reader.manifest().tokenizer;
  EXPECT_EQ(kept.kind, "sentencepiece");
  EXPECT_EQ(kept.vocab_size, 300);
  EXPECT_EQ(kept.model_file, kCheckpointTokenizerModel);
  EXPECT_EQ(slurp(ckpt + "/" + kCheckpointTokenizerModel), original);

  const TokenizerSnapshot snapshot = checkpoint_tokenizer(reader);
  EXPECT_EQ(snapshot.model, original);
  const auto tokenizer = make_tokenizer(snapshot, ckpt);
  EXPECT_EQ(tokenizer->vocab_size(), 300);
  EXPECT_EQ(tokenizer->decode(tokenizer->encode("kalo mine")), "kalo mine");
}

TEST_F(CheckpointTokenizer, TheByteTokenizerIsKeptAsItsIdentity) {
  const std::string ckpt = save("[data]\ntokenizer = \"byte\"\npath = \"gone\"\n", byte_tokenizer_snapshot());
  const CheckpointReader reader(ckpt);
  ASSERT_TRUE(reader.manifest().tokenizer.has_value());
  EXPECT_EQ(reader.manifest().tokenizer->describe(), "byte (vocab 257, eos 256)");
  EXPECT_FALSE(fs::exists(ckpt + "/" + kCheckpointTokenizerModel));
  EXPECT_EQ(make_tokenizer(checkpoint_tokenizer(reader), ckpt)->eos_id(), 256);
}

TEST_F(CheckpointTokenizer, DamagedOrMissingModelIsReported) {
  const std::string ckpt = save("[data]\ntokenizer = \"sentencepiece\"\npath = \"gone\"\n",
                                model_file_snapshot(train_model()));
  const std::string file = ckpt + "/" + kCheckpointTokenizerModel;
  std::string bytes = slurp(file);
  bytes[bytes.size() / 2] ^= 0x20;
  std::ofstream(file, std::ios::binary | std::ios::trunc) << bytes;
  const CheckpointReader reader(ckpt);  // the weights still load: only the tokenizer is damaged
  expect_error_mentions([&] { checkpoint_tokenizer(reader); }, {file, "fails its checksum", "earlier checkpoint"});
  fs::remove(file);
  expect_error_mentions([&] { checkpoint_tokenizer(reader); }, {"lacks its tokenizer model", file});
}

// A checkpoint written before checkpoints kept their tokenizer: its manifest has none.
TEST_F(CheckpointTokenizer, OlderCheckpointsFindItThroughTheirRecipe) {
  const std::string byte = save("[data]\ntokenizer = \"byte\"\npath = \"gone\"\n", std::nullopt, "byte");
  EXPECT_FALSE(CheckpointReader(byte).manifest().tokenizer.has_value());
  EXPECT_EQ(checkpoint_tokenizer(CheckpointReader(byte)).identity.kind, "byte");  // needs no dataset

  const std::string model = train_model();
  const std::string dataset = convert(model, "sp");
  const std::string sp =
      save("[data]\ntokenizer = \"sentencepiece\"\npath = \"" + dataset + "\"\n", std::nullopt, "sp-run");
  const TokenizerSnapshot found = checkpoint_tokenizer(CheckpointReader(sp));
  EXPECT_EQ(found.model, slurp(model));
  EXPECT_EQ(found.identity.kind, "sentencepiece");
  fs::rename(dataset, path("moved"));
  expect_error_mentions([&] { checkpoint_tokenizer(CheckpointReader(sp)); },
                        {sp, "written before checkpoints kept their tokenizer", dataset, "put the dataset back"});
}

TEST_F(CheckpointTokenizer, TheManifestKeepsTheModelBesideIt) {
  CheckpointManifest m;
  m.files = {{rank_file_name(0), 0, 0, {}, ""}};
  m.tokenizer = TokenizerIdentity{"sentencepiece", "sentencepiece", 300, 1, kCheckpointTokenizerModel, "crc32:00000000"};
  EXPECT_EQ(manifest_from_json(manifest_to_json(m), "m.json").tokenizer, m.tokenizer);
  m.tokenizer->model_file = "../elsewhere.model";
  expect_error_mentions([&] { manifest_from_json(manifest_to_json(m), "m.json"); },
                        {"m.json", "malformed tokenizer record"});
}

TEST_F(CheckpointTokenizer, EvaluationDataMustUseTheCheckpointsTokenizer) {
  const std::string bytes = convert("byte", "bytes");
  const std::string ckpt = save("[data]\ntokenizer = \"sentencepiece\"\npath = \"gone\"\n",
                                model_file_snapshot(train_model()));
  DataSection data;
  data.path = bytes;
  expect_error_mentions([&] { check_dataset_tokenizer(CheckpointReader(ckpt), data); },
                        {bytes, "byte (vocab 257, eos 256)", "sentencepiece (vocab 300", "--tokenizer"});
  data.path = convert(path("tok.model"), "same");
  EXPECT_NO_THROW(check_dataset_tokenizer(CheckpointReader(ckpt), data));
}

}  // namespace
}  // namespace ustrain
