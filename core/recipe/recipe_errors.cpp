#include "core/recipe/recipe_errors.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "kernels/error.h"

namespace ustrain {

bool RecipeErrors::attempt(const std::function<void()>& check, const std::function<bool()>& relevant) {
  try {
    check();
    return true;
  } catch (const UserError& error) {
    if (!relevant || relevant()) messages_.emplace_back(error.what());
    return false;
  }
}

void RecipeErrors::throw_if_any(const std::string& source) const {
  if (messages_.empty()) return;
  if (messages_.size() == 1) throw UserError(messages_.front());
  throw UserError(fmt::format("{} has {} problems:\n  {}", source, messages_.size(), fmt::join(messages_, "\n  ")));
}

}  // namespace ustrain
