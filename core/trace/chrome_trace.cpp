#include "core/trace/chrome_trace.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "data/files/json_input.h"
#include "kernels/error.h"

namespace ustrain {
namespace {

using nlohmann::json;

// Trace times are microseconds; the spans are kept in nanoseconds.
double microseconds(std::int64_t ns) { return static_cast<double>(ns) / 1000.0; }

json metadata(const char* what, int pid, int tid, json args) {
  return json{{"ph", "M"}, {"name", what}, {"pid", pid}, {"tid", tid}, {"args", std::move(args)}};
}

}  // namespace

std::string chrome_trace_json(const std::vector<TraceEvent>& events, const std::vector<std::string>& tracks,
                              const TraceProcess& process, const std::map<std::string, std::string>& other) {
  const int pid = process.rank;
  json out = json::array();
  out.push_back(metadata("process_name", pid, 0, {{"name", fmt::format("rank {}", pid)}}));
  out.push_back(metadata("process_sort_index", pid, 0, {{"sort_index", pid}}));
  if (!process.label.empty()) out.push_back(metadata("process_labels", pid, 0, {{"labels", process.label}}));
  for (std::size_t t = 0; t < tracks.size(); ++t) {
    const int tid = static_cast<int>(t);
    out.push_back(metadata("thread_name", pid, tid, {{"name", tracks[t]}}));
    out.push_back(metadata("thread_sort_index", pid, tid, {{"sort_index", tid}}));
  }
  for (const TraceEvent& e : events) {
    json args = {{"step", e.step}};
    for (const TraceArg& a : e.args) args[a.key] = a.value;
    out.push_back(json{{"ph", "X"}, {"name", e.name}, {"cat", e.category}, {"pid", pid}, {"tid", e.track},
                       {"ts", microseconds(e.begin_ns)}, {"dur", microseconds(e.end_ns - e.begin_ns)},
                       {"args", std::move(args)}});
  }
  json doc = {{"traceEvents", std::move(out)}, {"displayTimeUnit", "ms"}};
  if (!other.empty()) doc["otherData"] = other;
  return doc.dump();
}

std::string merge_chrome_traces(const std::vector<std::string>& documents) {
  json events = json::array();
  json other;
  for (std::size_t i = 0; i < documents.size(); ++i) {
    json doc = parse_json_or_discarded(documents[i]);
    if (doc.is_discarded() || !doc.is_object() || !doc.contains("traceEvents") || !doc["traceEvents"].is_array())
      throw UserError(fmt::format("trace part {} of {} is not a Chrome trace (no traceEvents array)", i,
                                  documents.size()));
    for (json& e : doc["traceEvents"]) events.push_back(std::move(e));
    if (other.is_null() && doc.contains("otherData")) other = doc["otherData"];
  }
  json merged = {{"traceEvents", std::move(events)}, {"displayTimeUnit", "ms"}};
  if (!other.is_null()) merged["otherData"] = std::move(other);
  return merged.dump();
}

}  // namespace ustrain
