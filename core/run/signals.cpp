#include "core/run/signals.h"

#include <unistd.h>

#include <csignal>

namespace ustrain {
namespace {

// Set by the handler, reset by StopSignals, read through StopSignals::pending: a handler can
// reach nothing but a global, and sig_atomic_t is the type it may safely write.
volatile std::sig_atomic_t g_pending_signal = 0;

constexpr int kSignals[] = {SIGTERM, SIGUSR1, SIGINT};

extern "C" void on_stop_signal(int signal) {
  if (signal == SIGINT && g_pending_signal != 0) _exit(128 + SIGINT);  // async-signal-safe
  if (g_pending_signal == 0) g_pending_signal = signal;
}

}  // namespace

StopSignals::StopSignals() {
  g_pending_signal = 0;
  struct sigaction action {};
  action.sa_handler = on_stop_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;  // reads and writes in progress continue rather than fail
  for (int i = 0; i < 3; ++i) sigaction(kSignals[i], &action, &previous_[i]);
}

StopSignals::~StopSignals() {
  for (int i = 0; i < 3; ++i) sigaction(kSignals[i], &previous_[i], nullptr);
  g_pending_signal = 0;
}

int StopSignals::pending() const { return g_pending_signal; }

const char* StopSignals::name(int signal) {
  switch (signal) {
    case SIGTERM: return "SIGTERM";
    case SIGUSR1: return "SIGUSR1";
    case SIGINT: return "SIGINT";
    default: return "a signal";
  }
}

}  // namespace ustrain
