// The layouts a plan searches: every combination of dp, tp, pp, cp, ep, ZeRO stage, sequence
// parallelism, recompute policy, micro-batch, pipeline schedule and virtual stages whose
// product is the number of devices and whose global batch is the asked number of tokens,
// kept only when the recipe checks `ustrain train` makes accept it (what the trainer would
// refuse is never proposed). cp and ep are searched over the values the checks accept, which
// today is 1 alone (this build refuses context and expert parallelism); they join the search
// by themselves when the checks accept them.
#pragma once

#include <cstdint>
#include <memory>
#include <set>
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
  // Hybrid sharding: ZeRO shards over blocks of dp_shard dp ranks; 0 means all of dp.
  std::int64_t dp_shard = 0;
  std::int64_t shard_dp() const { return dp_shard == 0 ? dp : dp_shard; }
  bool hybrid() const { return shard_dp() < dp; }

  // The recipe keys that make it: `--set` options for `ustrain train` (parallel.dp included).
  std::vector<std::string> overrides() const;
  std::string str() const;  // "dp 4 tp 2 pp 1 zero 1 sp mb 2 x4 1f1b"
};

struct SearchSpace {
  int devices = 1;
  int devices_per_node = 8;
  std::int64_t global_batch = 0;  // sequences per step
  bool model_parallel_across_nodes = false;  // tp and ep may span nodes
  // The parallel.* keys a user set by hand (in the recipe file or with --set), each fixing its
  // dimension at the value `given` holds: {"parallel.tp"} keeps only layouts with given.tp.
  // sp constrains only layouts with tp > 1, zero those with dp x cp > 1, pp_schedule and
  // virtual_stages those with pp > 1: elsewhere the key has no meaning.
  // train.micro_batch and train.recompute too, fixed at the values `given_train` holds.
  std::set<std::string> fixed;
  ParallelSection given;
  TrainSection given_train;
};

// The search's parallel.* keys, those `fixed` may name besides train.micro_batch and train.recompute.
const std::vector<std::string>& layout_keys();

// Those of the keys a user set by hand (`set_by_hand`, keys_set_by_hand; of them given with
// --set: `overridden`) that fix a dimension of the search: the parallel.* keys set either way,
// train.micro_batch and train.recompute given with --set. Every recipe file writes those two,
// as where its own runs start: in a file they are not a choice to keep.
std::set<std::string> layout_keys_among(const std::set<std::string>& set_by_hand,
                                        const std::set<std::string>& overridden);

// The value of parallel.* key `key` (one of layout_keys()) in `p`, as --set takes it.
std::string given_value(const std::string& key, const ParallelSection& p);
// The value of a key `space.fixed` holds, train.* ones included.
std::string given_value(const std::string& key, const SearchSpace& space);

// Whether `l` has the values `space` fixes.
bool keeps(const Layout& l, const SearchSpace& space);

// `base` with the layout's keys ([parallel] and train.micro_batch, recompute and global_batch).
Recipe recipe_with_layout(Recipe base, const Layout& layout, std::int64_t global_batch);

// A layout the recipe checks accepted. Its recipe is made again when asked for: tens of
// thousands of candidates each holding a copy of the recipe would take gigabytes.
struct Candidate {
  Layout layout;
  std::shared_ptr<const Recipe> base;  // shared by every candidate of a search
  std::int64_t global_batch = 0;       // sequences
  Recipe recipe() const;               // the base recipe with the layout's keys, checked
};

// The ZeRO shard groups worth trying for a layout of dp x cp x tp ranks (pp outermost): all of
// dp (0), and, under ZeRO when the data-parallel ranks span nodes, the divisors of dp whose
// blocks of dp_shard x cp x tp ranks do not straddle a node's edge: the largest block within a
// node, and every block of whole nodes. Hybrid sharding keeps the parameter gathers on the
// nearer links (and blocks of several nodes trade memory for fewer ranks to gather over).
std::vector<std::int64_t> shard_choices(std::int64_t dp, std::int64_t cp, std::int64_t tp, std::int64_t zero,
                                        std::int64_t devices_per_node);

// The divisors of n >= 1, ascending.
std::vector<std::int64_t> divisors(std::int64_t n);

// Bounds on a layout that keep a plan's memory and time finite whatever the batch: a
// micro-batch of more than 2^24 tokens on one rank (its recorded step holds their ids) fits no
// device's activations, and more than 2^14 micro-batches per step would make pipeline programs
// of millions of actions (the largest batches trained so far need a few thousand at most).
constexpr std::int64_t kMaxMicroBatchTokens = std::int64_t{1} << 24;
constexpr std::int64_t kMaxMicroBatchesPerStep = std::int64_t{1} << 14;

// The most layouts a search tries (each is checked as `ustrain train` checks a recipe): a
// million, several times what the largest questions (hundreds of GPUs, a 1M-token batch)
// try. More, and the search is refused with a message saying which keys narrow it.
constexpr std::int64_t kMaxLayoutsTried = std::int64_t{1} << 20;
// The most devices a plan is for: 2^20, beyond the largest clusters built so far.
constexpr std::int64_t kMaxPlanDevices = std::int64_t{1} << 20;

struct LayoutSearch {
  std::vector<Candidate> candidates;
  bool beyond_bounds = false;  // some split of the devices had no micro-batch size within the bounds
};

// Every layout of `space` within the bounds above that the recipe checks accept, applied to
// `base`.
LayoutSearch enumerate_layouts(const Recipe& base, const SearchSpace& space);

}  // namespace ustrain
