// Failures a multi-rank run must survive with a clear error on every rank that can report.
// Run under mpiexec by tests/mpi/expect_failure.sh, which checks each rank's message and exit
// status. main() is shaped like the ustrain binary's: the World lives inside the try block,
// errors are printed and turned into exit status 2.
//
// Modes (argv[1]):
//   layout         the recipe's layout needs 2 ranks; every rank stops before MPI starts
//   dead-peer      the last rank exits in the middle of a step; the others' all_reduce fails,
//                  naming it as the rank that did not answer
//   stopped-peer   the last rank is stopped (SIGSTOP) in the middle of a step: the same
//   stuck-peer     the last rank stays alive but never joins; the others wait for it, since it
//                  answers, until their patience runs out, then fail naming it
//   leaving-peer   the last rank stops with an error of its own mid-step; its World tells the
//                  others, whose all_reduce (with a deadline of minutes) fails at once, naming it
//   stuck-create   the last rank never creates a communicator; the others' creation fails
//   truncate       rank 1 receives a longer message than its buffer: MPI's error becomes a
//                  CommError on rank 1 instead of aborting the job; the others finish
//   slow-sender    on a group that carries both sends and collectives, the last rank sends
//                  to rank 0 then computes past the deadline before the all_reduce; rank 0
//                  waits in the all_reduce, asks, learns that the last rank is alive and has
//                  not reached it (its sends do not count as collectives), and every rank
//                  finishes
//   late-peer      the last rank joins an all_reduce just after the others gave up on it (past
//                  their patience); they unmap the buffer they gave it and stay a while (as
//                  ustrain does while it unwinds): MPI must never touch that buffer again, so
//                  every rank ends with its error, none with a crash
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "kernels/error.h"
#include "parallel/launch.h"
#include "parallel/world.h"

namespace ustrain {
namespace {

constexpr std::chrono::seconds kTimeout{2};
constexpr std::chrono::seconds kPatience{4};

int slow_sender(Communicator& comm, const Tensor& t, bool last) {
  const Tensor message = t.slice(0, 16);
  if (last) {
    comm.send(message, 0, 1).wait();
    comm.send(message, 0, 2).wait();
    std::this_thread::sleep_for(kTimeout + std::chrono::seconds(1));  // past the deadline, within the patience
  }
  comm.all_reduce(t).wait();
  if (comm.rank() == 0) {
    for (int tag = 1; tag <= 2; ++tag) comm.recv(message, comm.size() - 1, tag).wait();
  }
  std::fprintf(stderr, "rank %d: done\n", comm.rank());
  return 0;
}

int late_peer(Communicator& comm, bool last) {
  const std::int64_t n = std::int64_t{1} << 20;
  const std::size_t bytes = static_cast<std::size_t>(n) * sizeof(float);
  void* memory = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (memory == MAP_FAILED) throw UserError("mmap failed");
  const Tensor t(static_cast<float*>(memory), Shape{n});
  // Joins after the others' patience ran out, before their departure notices count.
  if (last) std::this_thread::sleep_for(kPatience + std::chrono::milliseconds(300));
  try {
    comm.all_reduce(t).wait();
  } catch (const CommError&) {
    ::munmap(memory, bytes);
    std::this_thread::sleep_for(std::chrono::seconds(3));
    throw;
  }
  std::fprintf(stderr, "rank %d: the step completed although a peer was missing\n", comm.rank());
  return 0;
}

int run(const std::string& mode) {
  const ProcessInfo process = discover_process();
  if (mode == "layout") check_layout(process, MeshShape{.dp = 2});

  // leaving-peer must not be found by the deadline: the departure notice has to do it.
  const std::chrono::milliseconds timeout = mode == "leaving-peer" ? std::chrono::minutes(2) : kTimeout;
  World world(process, CommOptions{timeout, kPatience, "the test's timeout"});
  const bool last = world.rank() == world.size() - 1;
  if (mode == "stuck-create" && last) {
    std::this_thread::sleep_for(3 * kTimeout);  // never creates the group
    std::_Exit(0);
  }
  auto comm = world.everyone();
  std::vector<float> grads(100003, 1.0f);
  Tensor t(grads.data(), Shape{static_cast<std::int64_t>(grads.size())});
  comm->all_reduce(t).wait();  // one good step: everyone is alive and connected
  if (mode == "late-peer") return late_peer(*comm, last);
  if (mode == "slow-sender") return slow_sender(*comm, t, last);
  if (mode == "truncate") {
    if (world.rank() == 0) comm->send(t.slice(0, 10), 1).wait();
    if (world.rank() == 1) comm->recv(t.slice(0, 5), 0).wait();
    std::_Exit(0);  // the others are done; rank 1 threw above
  }
  if (last && mode == "dead-peer") std::_Exit(3);  // dies without a word, mid-step
  if (last && mode == "leaving-peer") throw UserError("rank " + std::to_string(world.rank()) + " ran out of disk");
  if (last && mode == "stuck-peer") {
    std::this_thread::sleep_for(5 * kTimeout);  // well past the others' patience
    std::_Exit(0);
  }
  if (last && mode == "stopped-peer") {
    // Nothing of a stopped process runs, its progress thread included; a child ends it later.
    if (::fork() == 0) {
      std::this_thread::sleep_for(5 * kTimeout);
      ::kill(::getppid(), SIGKILL);
      std::_Exit(0);
    }
    ::raise(SIGSTOP);
  }
  comm->all_reduce(t).wait();
  std::fprintf(stderr, "rank %d: the step completed although a peer was missing\n", world.rank());
  return 0;
}

}  // namespace
}  // namespace ustrain

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s layout|dead-peer|stopped-peer|stuck-peer|leaving-peer|stuck-create|truncate|late-peer|slow-sender\n", argv[0]);
    return 64;
  }
  try {
    return ustrain::run(argv[1]);
  } catch (const ustrain::UserError& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 2;
  }
}
