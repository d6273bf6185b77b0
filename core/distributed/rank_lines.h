// Output that every rank of a job computes alike (`ustrain train --dry-run` under a launcher)
// is printed once: rank 0 prints it, and another rank only the lines rank 0 lacks (a warning
// about its own host), each marked with its rank.
#pragma once

#include <string>

#include "parallel/comm/communicator.h"

namespace ustrain {

// What this rank prints of `text`: all of it on rank 0; elsewhere its lines that are not among
// rank 0's, each as "rank R: LINE" (empty when there are none). Collective over `world`.
std::string lines_to_print(Communicator& world, const std::string& text);

}  // namespace ustrain
