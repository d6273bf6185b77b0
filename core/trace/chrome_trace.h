// One rank's recorded spans (parallel/comm/trace.h) as a Chrome trace, the JSON Trace Event
// Format that https://ui.perfetto.dev and chrome://tracing open, and the merge of every
// rank's trace into one file.
//
//   {"traceEvents": [...], "displayTimeUnit": "ms", "otherData": {...}}
//
// - "M" metadata events name the process ("rank N", sorted by rank, labelled with its place in
//   the mesh) and its tracks (threads in the format: the training loop, then the
//   communicators' lanes in order of first use).
// - One "X" (complete) event per span: name, cat (step, data, compute, layer, wait, optimizer,
//   checkpoint, validation, comm), ts and dur in microseconds since the origin the ranks agreed
//   on, pid = rank, tid = track, args = the step and the span's own arguments.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "parallel/comm/trace.h"

namespace ustrain {

struct TraceProcess {
  int rank = 0;
  std::string label;  // "pp 1, tp 0, dp 0"; empty: none
};

// The document for one rank. `other` goes into "otherData" (what the trace is of, the clock).
std::string chrome_trace_json(const std::vector<TraceEvent>& events, const std::vector<std::string>& tracks,
                              const TraceProcess& process, const std::map<std::string, std::string>& other = {});

// The documents of every rank as one: their events in order, otherData of the first. Throws
// UserError naming the document (by index) that is not a trace.
std::string merge_chrome_traces(const std::vector<std::string>& documents);

}  // namespace ustrain
