// Malformed and odd recipe inputs: each is a UserError or a valid recipe, never a crash.
#include "core/recipe/recipe.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "kernels/error.h"
#include "tests/unit/core/recipe/recipe_test_support.h"

namespace ustrain {
namespace {

using namespace recipe_test;

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

}  // namespace
}  // namespace ustrain
