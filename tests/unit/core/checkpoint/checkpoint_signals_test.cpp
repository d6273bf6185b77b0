// Stop requests: the signals Slurm and users send become a flag read at step boundaries; a
// second Ctrl-C ends the process at once; the previous handlers come back afterwards.
#include <gtest/gtest.h>

#include <csignal>

#include "core/run/signals.h"

namespace ustrain {
namespace {

volatile std::sig_atomic_t g_previous_handler_ran = 0;
extern "C" void previous_handler(int) { g_previous_handler_ran = 1; }

TEST(StopSignals, EachStopSignalIsRecordedNotFatal) {
  for (int sig : {SIGTERM, SIGUSR1, SIGINT}) {
    StopSignals signals;
    EXPECT_FALSE(signals.requested());
    std::raise(sig);
    EXPECT_TRUE(signals.requested());
    EXPECT_EQ(signals.pending(), sig);
  }
  EXPECT_STREQ(StopSignals::name(SIGUSR1), "SIGUSR1");
}

TEST(StopSignals, TheFirstSignalIsTheOneReported) {
  StopSignals signals;
  std::raise(SIGUSR1);
  std::raise(SIGTERM);
  EXPECT_EQ(signals.pending(), SIGUSR1);
}

TEST(StopSignals, RestoresThePreviousHandlers) {
  struct sigaction mine {}, saved {};
  mine.sa_handler = previous_handler;
  sigemptyset(&mine.sa_mask);
  sigaction(SIGUSR1, &mine, &saved);
  { StopSignals signals; }
  g_previous_handler_ran = 0;
  std::raise(SIGUSR1);
  EXPECT_EQ(g_previous_handler_ran, 1);
  sigaction(SIGUSR1, &saved, nullptr);
}

TEST(StopSignalsDeathTest, ASecondInterruptExitsAtOnce) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        StopSignals signals;
        std::raise(SIGINT);
        std::raise(SIGINT);
        std::_Exit(0);  // not reached
      },
      ::testing::ExitedWithCode(130), "");
}

}  // namespace
}  // namespace ustrain
