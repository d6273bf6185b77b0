// The recipe parser with --set overrides. Input: TOML text, then NUL-separated KEY=VALUE
// overrides. A recipe that parses must come back unchanged through to_toml.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "core/recipe/recipe.h"
#include "kernels/error.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string input(reinterpret_cast<const char*>(data), size);
  std::vector<std::string> parts;
  for (std::size_t at = 0;;) {
    const std::size_t nul = input.find('\0', at);
    parts.push_back(input.substr(at, nul == std::string::npos ? std::string::npos : nul - at));
    if (nul == std::string::npos) break;
    at = nul + 1;
  }
  const std::vector<std::string> overrides(parts.begin() + 1, parts.end());
  ustrain::Recipe recipe;
  try {
    recipe = ustrain::parse_recipe(parts[0], "fuzz.toml", overrides);
  } catch (const ustrain::UserError&) {
    return 0;
  }
  const ustrain::Recipe again = ustrain::parse_recipe(ustrain::to_toml(recipe), "fuzz.toml");
  if (!(again.run == recipe.run && again.model == recipe.model && again.data == recipe.data &&
        again.train == recipe.train && again.optim == recipe.optim && again.schedule == recipe.schedule &&
        again.parallel == recipe.parallel && again.checkpoint == recipe.checkpoint && again.log == recipe.log &&
        again.device == recipe.device))
    std::abort();  // the resolved recipe a run saves would not reload as the same recipe
  return 0;
}
