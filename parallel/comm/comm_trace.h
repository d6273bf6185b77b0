// How a communicator's operations appear in a trace (parallel/comm/trace.h): each one a span on a
// lane of the communicator's track, from its posting to its completion as the caller sees it
// (the wait() or test() that finds it done, or join_compute(): for a device operation the
// moment the compute stream is told to wait for it). An operation dropped unwaited ends when
// its handle goes. Its arguments: bytes (the payload, as CommVolume counts it), wire_bytes
// (what this rank sent), members, and for point to point the peer's global rank and the tag.
#pragma once

#include <string>
#include <vector>

#include "parallel/comm/communicator.h"
#include "parallel/comm/trace.h"

namespace ustrain {

// `work` wrapped so that its completion records the span begun at `posted` on a lane of `group`.
Work traced_work(Work work, Tracer& tracer, const std::string& group, const char* operation,
                 Tracer::Clock::time_point posted, std::vector<TraceArg> args);

}  // namespace ustrain
