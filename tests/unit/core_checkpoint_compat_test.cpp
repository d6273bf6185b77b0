// Resuming under a changed recipe: what is reported, what needs --force-resume, what is refused.
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "core/checkpoint/compat.h"
#include "core/recipe/recipe.h"
#include "kernels/error.h"

namespace ustrain {
namespace {

const char* kRecipe = R"(
[model]
d_model = 32
n_heads = 4
n_kv_heads = 2
ffn_hidden = 64
max_seq_len = 32
[data]
path = "data"
[train]
steps = 30
micro_batch = 4
global_batch = 8
seq_len = 32
)";

std::string resolved(const std::vector<std::string>& overrides = {}) {
  return to_toml(parse_recipe(kRecipe, "r.toml", overrides));
}

const RecipeChange* find(const std::vector<RecipeChange>& changes, const std::string& key) {
  for (const RecipeChange& c : changes)
    if (c.key == key) return &c;
  return nullptr;
}

TEST(RecipeChanges, ListsEveryChangedKeyWithItsKind) {
  const auto changes = recipe_changes(resolved(), resolved({"train.steps=60", "log.interval=3", "run.seed=7",
                                                            "model.d_model=64", "optim.lr=1e-3"}));
  ASSERT_EQ(changes.size(), 5u);
  ASSERT_NE(find(changes, "train.steps"), nullptr);
  EXPECT_EQ(find(changes, "train.steps")->saved, "30");
  EXPECT_EQ(find(changes, "train.steps")->current, "60");
  EXPECT_EQ(find(changes, "train.steps")->kind, RecipeChangeKind::harmless);
  EXPECT_EQ(find(changes, "log.interval")->kind, RecipeChangeKind::harmless);
  EXPECT_EQ(find(changes, "run.seed")->kind, RecipeChangeKind::breaks_exactness);
  EXPECT_EQ(find(changes, "optim.lr")->kind, RecipeChangeKind::breaks_exactness);
  EXPECT_EQ(find(changes, "model.d_model")->kind, RecipeChangeKind::model_shape);
  EXPECT_EQ(describe(*find(changes, "train.steps")), "train.steps 30 -> 60 (harmless)");
  EXPECT_TRUE(recipe_changes(resolved(), resolved()).empty());
}

TEST(RecipeChanges, KeysTheSavedRecipeLacksCountAtTheirDefault) {
  std::string saved = resolved();
  const std::size_t line = saved.find("\nkeep_last = ");
  ASSERT_NE(line, std::string::npos);
  saved.erase(line + 1, saved.find('\n', line + 1) - line);  // as if written before the key existed
  EXPECT_TRUE(recipe_changes(saved, resolved()).empty());
  const auto changes = recipe_changes(saved, resolved({"checkpoint.keep_last=9"}));
  ASSERT_EQ(changes.size(), 1u);
  EXPECT_EQ(changes[0].key, "checkpoint.keep_last");
}

TEST(RecipeChanges, Classification) {
  for (const char* k : {"train.steps", "train.eval_interval", "train.max_bad_steps", "train.recompute", "log.level",
                        "checkpoint.interval", "checkpoint.keep_last", "run.name", "parallel.comm_timeout_s",
                        "parallel.startup_timeout_s", "log.trace_steps"})
    EXPECT_EQ(classify_recipe_key(k), RecipeChangeKind::harmless) << k;
  for (const char* k : {"parallel.dp", "parallel.tp", "parallel.sp", "parallel.pp", "parallel.cp",
                        "parallel.pp_schedule", "parallel.virtual_stages", "parallel.zero", "train.micro_batch"})
    EXPECT_EQ(classify_recipe_key(k), RecipeChangeKind::reassociates) << k;
  // RoPE scaling changes the numbers, not the shapes.
  for (const char* k : {"run.seed", "data.path", "train.global_batch", "train.seq_len",
                        "schedule.decay", "optim.weight_decay", "device.threads", "train.grad_clip",
                        "model.rope_scaling", "model.rope_scaling_factor", "model.rope_low_freq_factor",
                        "model.rope_high_freq_factor", "model.rope_original_max_seq_len",
                        "train.document_mask", "model.sliding_window"})  // masks change what attention sees
    EXPECT_EQ(classify_recipe_key(k), RecipeChangeKind::breaks_exactness) << k;
  for (const char* k : {"model.vocab_size", "model.n_layers", "model.n_heads", "model.n_kv_heads",
                        "model.ffn_hidden", "model.tied_embeddings"})
    EXPECT_EQ(classify_recipe_key(k), RecipeChangeKind::model_shape) << k;
}

TEST(ResumeRules, ForceLetsExactnessChangesThroughButNotShapeChanges) {
  const auto harmless = recipe_changes(resolved(), resolved({"train.steps=60"}));
  EXPECT_NO_THROW(check_resume_changes(harmless, false, "ck"));
  const auto seed = recipe_changes(resolved(), resolved({"run.seed=7"}));
  try {
    check_resume_changes(seed, false, "runs/x/checkpoints/step-00000010");
    ADD_FAILURE() << "a seed change was accepted without --force-resume";
  } catch (const UserError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("runs/x/checkpoints/step-00000010"), std::string::npos) << m;
    EXPECT_NE(m.find("run.seed"), std::string::npos) << m;
    EXPECT_NE(m.find("--force-resume"), std::string::npos) << m;
  }
  EXPECT_NO_THROW(check_resume_changes(seed, true, "ck"));
  const auto shape = recipe_changes(resolved(), resolved({"model.n_layers=3"}));
  EXPECT_THROW(check_resume_changes(shape, true, "ck"), UserError);
}

// A checkpoint written before the mask keys existed resumes under them at their defaults; turning
// one on is named and refused without --force-resume.
TEST(ResumeRules, TurningAMaskOnIsRefusedNamingTheKey) {
  for (const std::string key : {"train.document_mask=true", "model.sliding_window=64"}) {
    const auto changes = recipe_changes(resolved(), resolved({key}));
    ASSERT_EQ(changes.size(), 1u) << key;
    try {
      check_resume_changes(changes, false, "runs/x/checkpoints/step-00000010");
      ADD_FAILURE() << key << " was accepted without --force-resume";
    } catch (const UserError& e) {
      const std::string m = e.what();
      EXPECT_NE(m.find(key.substr(0, key.find('=')) + " "), std::string::npos) << m;
      EXPECT_NE(m.find("breaks exact resume"), std::string::npos) << m;
      EXPECT_NE(m.find("--force-resume"), std::string::npos) << m;
    }
  }
}

TEST(ResumeRules, AnotherOptimizerIsRefusedEvenWhenForced) {
  for (const auto& [saved, current] : {std::pair{"adamw", "muon"}, std::pair{"muon", "adamw"}}) {
    const auto changes = recipe_changes(resolved({std::string("optim.name=") + saved}),
                                        resolved({std::string("optim.name=") + current}));
    try {
      check_resume_changes(changes, /*force=*/true, "runs/x/checkpoints/step-00000010");
      ADD_FAILURE() << "resuming " << saved << " as " << current << " was accepted";
    } catch (const UserError& e) {
      const std::string m = e.what();
      EXPECT_NE(m.find("runs/x/checkpoints/step-00000010"), std::string::npos) << m;
      EXPECT_NE(m.find(std::string("optim.name = \"") + saved + "\""), std::string::npos) << m;
      EXPECT_NE(m.find(std::string("optim.name = \"") + current + "\""), std::string::npos) << m;
    }
  }
  // A checkpoint from before the key existed trained with AdamW.
  const auto same = recipe_changes(resolved(), resolved({"optim.name=adamw"}));
  EXPECT_NO_THROW(check_resume_changes(same, false, "ck"));
}

}  // namespace
}  // namespace ustrain
