// What an operation past its deadline learns from the members it waits for, and what to do
// about it. The MPI backend asks every other member of the group, over a channel of its own
// (parallel/comm/mpi_peer_check.h), whether it has started the operation and what it is doing;
// judge() turns the answers into a decision and a message that names the ranks.
//
// A member that does not answer within the asking window (5 s, whatever the timeout) is
// stopped (SIGSTOP, a debugger), hung inside MPI, dead, unreachable, or so overloaded that its
// answer comes late: the operation fails at once. A member that answers is
// alive (computing, or waiting for others in turn): the operation keeps waiting, up to the
// communicator's patience (CommOptions::patience). When every member has started the
// operation, nobody is missing and the transport itself stalled: the operation fails.
#pragma once

#include <string>
#include <vector>

namespace ustrain {

struct PeerAnswer {
  int rank = 0;           // global rank
  bool answered = false;  // within the window
  bool started = false;   // it has issued this operation
  // When it has not: what its communication is doing, e.g. "waiting 12 s for collective
  // all_reduce of 10 f32 (sum) on tp group (ranks 2,3)", or "not communicating for 40 s".
  std::string activity;
};

struct PeerVerdict {
  bool keep_waiting = false;
  // "rank 3 did not answer within 5 s: ...; rank 1 has not reached this operation: ..."
  std::string explanation;
};

// `window`: how long the members had to answer, for the message ("5 s").
PeerVerdict judge(const std::vector<PeerAnswer>& answers, const std::string& window);

}  // namespace ustrain
