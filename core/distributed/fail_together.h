// Work that only some ranks do (the leading rank locking and preparing the run directory,
// every rank checking its own disk) must not leave the others waiting in the next collective
// when it fails on one: they would hang until the communication deadline and then report a
// timeout instead of the cause. fail_together runs the work on this rank and then lets every
// rank fail with the first failing rank's message. Text one rank holds (a message, a decision)
// reaches the others with broadcast_text.
#pragma once

#include <functional>
#include <string>

#include "parallel/comm/communicator.h"

namespace ustrain {

// Collective over `group`: `root`'s `text` on every rank (what the others pass is ignored),
// its length first, then its bytes in 32-bit words.
std::string broadcast_text(Communicator& group, const std::string& text, int root);

// Collective over `group`. Runs `work` here; when it throws UserError on any rank, throws on
// every rank the UserError of the lowest failing rank, its message prefixed with "rank R: "
// in a group of several. Other exceptions pass through on the rank that raised them.
void fail_together(Communicator& group, const std::function<void()>& work);

}  // namespace ustrain
