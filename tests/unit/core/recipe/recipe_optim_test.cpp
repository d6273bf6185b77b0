// The [optim] section's choice of optimizer and Muon's keys.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/recipe/recipe.h"
#include "kernels/error.h"

namespace ustrain {
namespace {

const std::string kMinimal = "[data]\npath = \"shards\"\n[model]\nn_heads = 4\nn_kv_heads = 2\n";

std::string error_of(const std::vector<std::string>& overrides) {
  try {
    parse_recipe(kMinimal, "test.toml", overrides);
  } catch (const UserError& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected a UserError";
  return "";
}

TEST(RecipeOptim, AdamWByDefaultMuonOnRequest) {
  EXPECT_EQ(parse_recipe(kMinimal, "test.toml").optim.name, "adamw");
  const Recipe r = parse_recipe(kMinimal, "test.toml",
                                {"optim.name=muon", "optim.muon_momentum=0.9", "optim.muon_nesterov=false",
                                 "optim.muon_ns_steps=3"});
  EXPECT_EQ(r.optim.name, "muon");
  EXPECT_EQ(r.optim.muon_momentum, 0.9);
  EXPECT_FALSE(r.optim.muon_nesterov);
  EXPECT_EQ(r.optim.muon_ns_steps, 3);
}

TEST(RecipeOptim, BadChoicesNameTheKey) {
  const std::string unknown = error_of({"optim.name=sgd"});
  EXPECT_NE(unknown.find("optim.name"), std::string::npos) << unknown;
  EXPECT_NE(unknown.find("adamw, muon"), std::string::npos) << unknown;
  const std::string steps = error_of({"optim.muon_ns_steps=0"});
  EXPECT_NE(steps.find("optim.muon_ns_steps"), std::string::npos) << steps;
  const std::string momentum = error_of({"optim.muon_momentum=1.0"});
  EXPECT_NE(momentum.find("optim.muon_momentum"), std::string::npos) << momentum;
}

}  // namespace
}  // namespace ustrain
