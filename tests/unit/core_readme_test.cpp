// Docs that match the code: the README's recipe reference is the schema's own rendering.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "core/recipe/recipe.h"

namespace ustrain {
namespace {

TEST(Readme, RecipeReferenceMatchesTheSchema) {
  std::ifstream in(std::string(USTRAIN_SOURCE_DIR) + "/README.md");
  ASSERT_TRUE(in) << "README.md not found";
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string text = ss.str();
  const std::string begin = "<!-- recipe-reference:begin -->\n", end = "<!-- recipe-reference:end -->";
  const auto b = text.find(begin), e = text.find(end);
  ASSERT_NE(b, std::string::npos);
  ASSERT_NE(e, std::string::npos);
  const std::string documented = text.substr(b + begin.size(), e - b - begin.size());
  EXPECT_EQ(documented, recipe_reference_markdown())
      << "README.md's recipe reference is stale: regenerate it with scripts/update-readme.sh";
}

}  // namespace
}  // namespace ustrain
