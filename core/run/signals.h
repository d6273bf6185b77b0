// Stop requests from outside: SIGTERM and SIGUSR1 (what Slurm sends before a time limit with
// `--signal`, and on preemption) and a first SIGINT (Ctrl-C) ask the trainer to save a
// checkpoint at the next step boundary and exit with kExitStopped; a SIGINT while a stop is
// already pending exits at once (status 130), which leaves the previous checkpoint intact.
#pragma once

#include <csignal>

namespace ustrain {

// Exit status of `ustrain train` after a signal-triggered checkpoint: resume with
// `--resume auto`.
inline constexpr int kExitStopped = 3;

// Installs the handlers for its lifetime and restores the previous ones afterwards. A signal
// handler can reach no object, so the pending signal lives in one process-wide
// sig_atomic_t (the only global mutable state in ustrain); this class is the way to read it.
// At most one instance may exist at a time (the trainer's, while it trains).
class StopSignals {
 public:
  StopSignals();
  ~StopSignals();
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;

  bool requested() const { return pending() != 0; }
  int pending() const;  // the signal that asked to stop, 0 when none
  static const char* name(int signal);  // "SIGTERM"

 private:
  struct sigaction previous_[3];  // the handlers to restore: SIGTERM, SIGUSR1, SIGINT
};

}  // namespace ustrain
