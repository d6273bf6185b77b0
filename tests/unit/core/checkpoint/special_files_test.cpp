// Inputs of the core floor that are no regular file: a FIFO as a config.json, a safetensors
// shard, a calibration file or a recipe, and a directory as a calibration file. Each is refused at once
// naming the path and what it is; opening a FIFO nobody writes to used to wait forever, and a
// directory as --calibration escaped as an internal error.
#include <gtest/gtest.h>

#include <string>

#include "core/checkpoint/fs.h"
#include "core/checkpoint/tokenizer.h"
#include "core/checkpoint/safetensors_file.h"
#include "core/plan/calibration.h"
#include "core/recipe/recipe.h"
#include "tests/unit/data/test_support.h"
#include "tests/unit/support/fifo_support.h"
#include "tests/unit/support/user_error_support.h"

namespace ustrain {
namespace {

TEST(SpecialFiles, AFifoIsRefusedAtOnceNamingIt) {
  test::ScratchDir dir;
  test::make_fifo(dir / "config.json");
  expect_mentions(test::error_reading_fifo(dir / "config.json", [&] { read_text_file(dir / "config.json"); }),
                  {dir / "config.json is a FIFO (named pipe), not a regular file"});
  test::make_fifo(dir / "model-00001-of-00002.safetensors");
  expect_mentions(test::error_reading_fifo(dir / "model-00001-of-00002.safetensors",
                                           [&] { SafetensorsReader reader(dir / "model-00001-of-00002.safetensors"); }),
                  {dir / "model-00001-of-00002.safetensors is a FIFO (named pipe), not a regular file"});
  test::make_fifo(dir / "calibration.json");
  expect_mentions(test::error_reading_fifo(dir / "calibration.json", [&] { read_calibration(dir / "calibration.json"); }),
                  {"--calibration", dir / "calibration.json is a FIFO (named pipe), not a regular file"});
}

// A recipe too: train, plan, eval, bench and ckpt import waited on a FIFO as their recipe.
TEST(SpecialFiles, AFifoAsTheRecipeIsRefusedAtOnceNamingIt) {
  test::ScratchDir dir;
  test::make_fifo(dir / "recipe.toml");
  expect_mentions(test::error_reading_fifo(dir / "recipe.toml", [&] { load_recipe(dir / "recipe.toml"); }),
                  {dir / "recipe.toml is a FIFO (named pipe), not a regular file", "a .toml recipe"});
}

// ckpt import --tokenizer FILE: a FIFO was reported as not found, though the path exists.
TEST(SpecialFiles, AFifoAsTheImportedTokenizerIsNamedAsOne) {
  test::ScratchDir dir;
  test::make_fifo(dir / "tokenizer.json");
  expect_mentions(test::error_reading_fifo(dir / "tokenizer.json", [&] { model_file_snapshot(dir / "tokenizer.json"); }),
                  {dir / "tokenizer.json is a FIFO (named pipe), not a regular file"});
}

TEST(SpecialFiles, ADirectoryIsRefusedNamingIt) {
  test::ScratchDir dir;
  expect_error_mentions([&] { read_calibration(dir.path().string()); },
                        {"--calibration", dir.path().string() + " is a directory, not a regular file"});
  expect_error_mentions([&] { read_text_file(dir.path().string()); },
                        {dir.path().string() + " is a directory, not a regular file"});
}

}  // namespace
}  // namespace ustrain
