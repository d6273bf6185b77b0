// What `ustrain train --dry-run` prints.
#pragma once

#include <string>

#include "core/recipe/recipe.h"
#include "core/run/launch_lines.h"

namespace ustrain {

// The resolved recipe, the datasets, the parameter count and the memory plan. Checks what
// training would check first, without training: the datasets exist and match the recipe
// (tokenizer, vocabulary, enough tokens, every shard readable, data.verify's checksums),
// device.threads against this host's cores, and a CPU recipe's plan fits this host's
// available memory. Under a launcher the ranks first check that they all agree
// (core/distributed/rank_agreement.h), the dry run being part of the command. Without one, a
// layout of several ranks is planned as that many processes on this host, and the output ends
// with the lines that start `command` so.
std::string describe_run(const Recipe& recipe, const TrainCommand& command);

}  // namespace ustrain
