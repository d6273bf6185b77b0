// Docs that match the code: docs/recipes.md's recipe reference is the schema's own rendering.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "core/recipe/recipe.h"

namespace ustrain {
namespace {

TEST(Docs, RecipeReferenceMatchesTheSchema) {
  std::ifstream in(std::string(USTRAIN_SOURCE_DIR) + "/docs/recipes.md");
  ASSERT_TRUE(in) << "docs/recipes.md not found";
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string text = ss.str();
  const std::string begin = "<!-- recipe-reference:begin -->\n", end = "<!-- recipe-reference:end -->";
  const auto b = text.find(begin), e = text.find(end);
  ASSERT_NE(b, std::string::npos);
  ASSERT_NE(e, std::string::npos);
  const std::string documented = text.substr(b + begin.size(), e - b - begin.size());
  EXPECT_EQ(documented, recipe_reference_markdown())
      << "docs/recipes.md's recipe reference is stale: regenerate it with scripts/update-recipe-reference.sh";
}

}  // namespace
}  // namespace ustrain
