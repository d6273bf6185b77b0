// The inputs that once crashed the checkpoint_manifest and safetensors fuzz targets
// (fuzz/regressions/TARGET/), read as ustrain reads them: each either reads or is a UserError
// that names its file, never another exception. A JSON number beyond a double (1e999999) in a
// checkpoint manifest or a safetensors header used to escape the JSON parser as an internal
// error. (The data readers' regressions: tests/unit/data/fuzz_regressions_test.cpp.)
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "core/checkpoint/format.h"
#include "core/checkpoint/safetensors_file.h"
#include "tests/unit/support/user_error_support.h"

namespace ustrain {
namespace {

namespace fs = std::filesystem;

// The kept inputs of one target, sorted.
std::vector<fs::path> regressions(const std::string& target) {
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(fs::path(USTRAIN_SOURCE_DIR) / "fuzz/regressions" / target))
    files.push_back(entry.path());
  std::sort(files.begin(), files.end());
  return files;
}

std::string slurp(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// `read` either succeeds or throws a UserError naming `file`.
void reads_or_names(const std::string& file, const std::function<void()>& read) {
  try {
    read();
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find(file), std::string::npos) << e.what();
  }
}

TEST(FuzzRegressions, CheckpointManifests) {
  for (const fs::path& input : regressions("checkpoint_manifest"))
    reads_or_names("checkpoints/7/manifest.json",
                   [&] { manifest_from_json(slurp(input), "checkpoints/7/manifest.json"); });
  const std::string overflow =
      slurp(fs::path(USTRAIN_SOURCE_DIR) / "fuzz/regressions/checkpoint_manifest/number-beyond-double.json");
  expect_error_mentions([&] { manifest_from_json(overflow, "checkpoints/7/manifest.json"); },
                        {"checkpoints/7/manifest.json", "not valid JSON"});
}

TEST(FuzzRegressions, SafetensorsHeaders) {
  for (const fs::path& input : regressions("safetensors"))
    reads_or_names(input.string(), [&] { SafetensorsReader reader(input.string()); });
  const fs::path overflow =
      fs::path(USTRAIN_SOURCE_DIR) / "fuzz/regressions/safetensors/number-beyond-double.safetensors";
  expect_error_mentions([&] { SafetensorsReader reader(overflow.string()); },
                        {overflow.string(), "JSON header does not parse"});
}

}  // namespace
}  // namespace ustrain
