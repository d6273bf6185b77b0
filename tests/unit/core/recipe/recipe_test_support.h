// What the recipe tests share: parsing a recipe text, the error it is refused with, and the
// recipe fixtures under tests/data/recipes.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/recipe/recipe.h"
#include "kernels/error.h"

namespace ustrain::recipe_test {

inline const std::string kSource = "test.toml";
// The smallest valid recipe: only data.path has no usable default.
inline const std::string kMinimal = "[data]\npath = \"shards\"\n";

inline std::string fixture(const std::string& name) {
  return std::string(USTRAIN_SOURCE_DIR) + "/tests/data/recipes/" + name;
}

inline Recipe parse(const std::string& text, const std::vector<std::string>& overrides = {}) {
  return parse_recipe(text, kSource, overrides);
}

// The UserError message for a recipe that must be rejected.
inline std::string error_of(const std::string& text, const std::vector<std::string>& overrides = {}) {
  try {
    parse_recipe(text, kSource, overrides);
  } catch (const UserError& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected a UserError for:\n" << text;
  return "";
}

}  // namespace ustrain::recipe_test
