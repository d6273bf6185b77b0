// The span recorder behind log.trace_steps: spans only while recording, tracks and lanes,
// and asynchronous operations recorded from posting to completion.
#include <gtest/gtest.h>

#include <thread>
#include <vector>

#include "parallel/comm/comm_trace.h"
#include "parallel/comm/trace.h"

namespace ustrain {
namespace {

using std::chrono::milliseconds;

TEST(Tracer, ScopesRecordOnlyWhileRecording) {
  Tracer tracer;
  int made = 0;
  const auto name = [&] {
    ++made;
    return std::string("made");
  };
  { const TraceScope off(&tracer, 0, "compute", name, {{"micro", 1}}); }
  { const TraceScope none(nullptr, 0, "compute", "nothing"); }
  EXPECT_TRUE(tracer.events().empty());
  EXPECT_EQ(made, 0) << "a name is built only when it is recorded";

  const auto origin = Tracer::Clock::now();
  tracer.start(origin);
  tracer.set_step(7);
  {
    const TraceScope outer(&tracer, 0, "step", "step 7");
    const TraceScope inner(&tracer, 0, "compute", name, {{"micro", 3}, {"chunk", 1}});
    std::this_thread::sleep_for(milliseconds(2));
  }
  tracer.stop();
  { const TraceScope after(&tracer, 0, "compute", "after"); }

  const std::vector<TraceEvent> events = tracer.events();
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(made, 1);
  // The inner scope ends first; both lie within the origin and now, the inner inside the outer.
  const TraceEvent& inner = events[0];
  const TraceEvent& outer = events[1];
  EXPECT_EQ(inner.name, "made");
  EXPECT_STREQ(inner.category, "compute");
  EXPECT_EQ(inner.step, 7);
  ASSERT_EQ(inner.args.size(), 2u);
  EXPECT_STREQ(inner.args[0].key, "micro");
  EXPECT_EQ(inner.args[0].value, 3);
  EXPECT_EQ(outer.name, "step 7");
  EXPECT_GE(inner.begin_ns, outer.begin_ns);
  EXPECT_LE(inner.end_ns, outer.end_ns);
  EXPECT_GE(inner.end_ns - inner.begin_ns, 2'000'000);
  EXPECT_GE(outer.begin_ns, 0);
  tracer.clear();
  EXPECT_TRUE(tracer.events().empty());
}

TEST(Tracer, TracksAreNamedOnceInOrderOfFirstUse) {
  Tracer tracer;
  EXPECT_EQ(tracer.track("training loop"), 0);
  EXPECT_EQ(tracer.track("dp group (ranks 0,1)"), 1);
  EXPECT_EQ(tracer.track("tp group (ranks 0,1)"), 2);
  EXPECT_EQ(tracer.track("dp group (ranks 0,1)"), 1);
  EXPECT_EQ(tracer.track_names(), (std::vector<std::string>{"training loop", "dp group (ranks 0,1)",
                                                            "tp group (ranks 0,1)"}));
}

TEST(Tracer, OverlappingOperationsTakeLanesAndGiveThemBack) {
  Tracer tracer;
  tracer.start(Tracer::Clock::now());
  const auto posted = Tracer::Clock::now();
  // Three operations in flight on one group: three lanes; the lowest free one is reused.
  Work a = traced_work(Work(), tracer, "dp group", "all_reduce", posted, {{"bytes", 64}});
  Work b = traced_work(Work(), tracer, "dp group", "reduce_scatter", posted, {{"bytes", 32}});
  Work c = traced_work(Work(), tracer, "dp group", "all_gather", posted, {{"bytes", 16}});
  b.wait();
  Work d = traced_work(Work(), tracer, "dp group", "send", posted, {{"bytes", 8}});
  EXPECT_TRUE(a.test());
  c.join_compute();
  d.wait();
  d.wait();  // completing twice records once
  const std::vector<std::string> tracks = tracer.track_names();
  EXPECT_EQ(tracks, (std::vector<std::string>{"training loop", "dp group", "dp group #2", "dp group #3"}));
  const std::vector<TraceEvent> events = tracer.events();
  ASSERT_EQ(events.size(), 4u);
  EXPECT_EQ(events[0].name, "reduce_scatter");
  EXPECT_EQ(events[0].track, 2);
  EXPECT_EQ(events[1].name, "all_reduce");
  EXPECT_EQ(events[1].track, 1);
  EXPECT_EQ(events[2].name, "all_gather");
  EXPECT_EQ(events[2].track, 3);
  EXPECT_EQ(events[3].name, "send");
  EXPECT_EQ(events[3].track, 2) << "the send took the lane the reduce-scatter gave back";
  for (const TraceEvent& e : events) {
    EXPECT_STREQ(e.category, "comm");
    EXPECT_LE(e.begin_ns, e.end_ns);
  }
}

TEST(Tracer, AnOperationDroppedUnwaitedEndsWithItsHandle) {
  Tracer tracer;
  tracer.start(Tracer::Clock::now());
  tracer.set_step(3);
  { Work dropped = traced_work(Work(), tracer, "pp group", "recv", Tracer::Clock::now(), {{"bytes", 4}}); }
  tracer.set_step(4);
  const std::vector<TraceEvent> events = tracer.events();
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].step, 3) << "the step it was posted in";
  // The lane is free again.
  Work next = traced_work(Work(), tracer, "pp group", "recv", Tracer::Clock::now(), {});
  next.wait();
  EXPECT_EQ(tracer.events().back().track, events[0].track);
}

TEST(Tracer, AFailedOperationStillEndsItsSpan) {
  Tracer tracer;
  tracer.start(Tracer::Clock::now());
  Work failing = traced_work(Work::failed("peer died"), tracer, "tp group", "all_reduce", Tracer::Clock::now(), {});
  EXPECT_THROW(failing.wait(), CommError);
  EXPECT_EQ(tracer.events().size(), 1u);
}

}  // namespace
}  // namespace ustrain
