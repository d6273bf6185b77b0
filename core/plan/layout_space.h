// The layouts a plan searches: every combination of dp, tp, pp, cp, ep, ZeRO stage, sequence
// parallelism, recompute policy, micro-batch, pipeline schedule and virtual stages whose
// product is the number of devices and whose global batch is the asked number of tokens,
// kept only when the recipe checks `ustrain train` makes accept it (what the trainer would
// refuse is never proposed). cp and ep are searched over the values the checks accept, which
// today is 1 alone (this build refuses context and expert parallelism); they join the search
// by themselves when the checks accept them.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/recipe/recipe.h"

namespace ustrain {

struct Layout {
  std::int64_t dp = 1, tp = 1, pp = 1, cp = 1, ep = 1, zero = 0;
  bool sp = false;
  std::string recompute = "none";
  std::int64_t micro_batch = 1, grad_accum = 1;
  std::string pp_schedule = "1f1b";
  std::int64_t virtual_stages = 1;

  // The recipe keys that make it: `--set` options for `ustrain train` (parallel.dp included).
  std::vector<std::string> overrides() const;
  std::string str() const;  // "dp 4 tp 2 pp 1 zero 1 sp mb 2 x4 1f1b"
};

struct SearchSpace {
  int devices = 1;
  int devices_per_node = 8;
  std::int64_t global_batch = 0;  // sequences per step
  bool model_parallel_across_nodes = false;  // tp and ep may span nodes
};

struct Candidate {
  Layout layout;
  Recipe recipe;  // the base recipe with the layout's keys, checked
};

// Every layout of `space` the recipe checks accept, applied to `base`.
std::vector<Candidate> enumerate_layouts(const Recipe& base, const SearchSpace& space);

}  // namespace ustrain
