// Every rank of a job must train the same thing: the same recipe (up to keys that may differ
// between machines), the same ustrain build and the same checkpoint to resume from. Ranks
// launched with different recipes would otherwise mix slices of two models into one
// checkpoint, crash inside a collective of mismatched sizes, or hang at a step one rank never
// reaches. The check runs once at start, over the world, before any other group exists.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/recipe/recipe.h"
#include "parallel/comm/communicator.h"

namespace ustrain {

// Something every rank must hold the same value of.
struct RankFact {
  std::string name;   // "run.seed", "ustrain version", ...
  std::string value;  // as text
};

// The facts of a training start: the build, the command ("ustrain train", "ustrain bench"),
// every recipe key but device.threads, data.prefetch and log.level (which may differ between
// machines), and the checkpoint the run resumes from ("" for a new run).
std::vector<RankFact> start_facts(const Recipe& recipe, const std::string& version, const std::string& resume_from,
                                  const std::string& command = "ustrain train");

// Every rank's `words` (the same count on each), in rank order. Collective over `world`.
std::vector<std::uint32_t> gather_words(Communicator& world, const std::vector<std::uint32_t>& words);

// Collective over `world`. When any fact differs between ranks, throws the same UserError on
// every rank, naming the first differing fact, its values and the ranks that hold each.
void check_ranks_agree(Communicator& world, const std::vector<RankFact>& facts);

}  // namespace ustrain
