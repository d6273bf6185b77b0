// log.trace_steps: the step range, the Chrome trace of one rank's spans and the merge of
// every rank's trace into one file.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <set>
#include <string>
#include <vector>

#include "core/trace/chrome_trace.h"
#include "core/recipe/step_range.h"
#include "kernels/error.h"

namespace ustrain {
namespace {

using nlohmann::json;

std::string error_of(std::string_view text) {
  try {
    parse_step_range(text);
  } catch (const UserError& e) {
    return e.what();
  }
  return "";
}

TEST(StepRange, ParsesARangeOrOneStep) {
  EXPECT_EQ(parse_step_range(""), std::nullopt);
  EXPECT_EQ(parse_step_range("10-12"), (StepRange{10, 12}));
  EXPECT_EQ(parse_step_range("10"), (StepRange{10, 10}));
  EXPECT_EQ(parse_step_range("1-1"), (StepRange{1, 1}));
  const StepRange r{10, 12};
  EXPECT_FALSE(r.contains(9));
  EXPECT_TRUE(r.contains(10));
  EXPECT_TRUE(r.contains(12));
  EXPECT_FALSE(r.contains(13));
  EXPECT_EQ(describe(r), "steps 10-12");
  EXPECT_EQ(describe(StepRange{4, 4}), "step 4");
}

TEST(StepRange, RefusesWhatIsNotARangeSayingWhatIs) {
  for (const char* bad : {"x", "10-", "-12", "10 - 12", " 10", "10-12-14", "+3", "0", "0-2", "1.5", "10..12",
                          "99999999999999999999"}) {
    SCOPED_TRACE(bad);
    const std::string message = error_of(bad);
    EXPECT_NE(message.find("is not a step range"), std::string::npos) << message;
    EXPECT_NE(message.find("\"10-12\""), std::string::npos) << message;
  }
  const std::string backwards = error_of("12-10");
  EXPECT_NE(backwards.find("ends before it begins"), std::string::npos) << backwards;
  EXPECT_NE(backwards.find("\"10-12\""), std::string::npos) << backwards;
}

std::vector<TraceEvent> sample_events() {
  return {TraceEvent{"forward mb 0", "compute", 0, 1500, 4250, 2, {{"micro", 0}, {"chunk", 0}}},
          TraceEvent{"all_reduce", "comm", 1, 2000, 9000, 2, {{"bytes", 4096}, {"wire_bytes", 4096}}},
          TraceEvent{"step 3", "step", 0, 10000, 20000, 3, {}}};
}

TEST(ChromeTrace, OneRankAsCompleteEventsWithNamedProcessAndTracks) {
  const std::string text = chrome_trace_json(sample_events(), {"training loop", "dp group (ranks 0,1)"},
                                             TraceProcess{1, "pp 1"}, {{"traced", "steps 2-3"}});
  const json doc = json::parse(text);  // throws if it is not JSON
  ASSERT_TRUE(doc["traceEvents"].is_array());
  EXPECT_EQ(doc["otherData"]["traced"], "steps 2-3");
  std::vector<json> complete;
  std::set<std::pair<int, std::string>> threads;
  std::string process, labels;
  for (const json& e : doc["traceEvents"]) {
    EXPECT_EQ(e["pid"], 1);
    if (e["ph"] == "X") complete.push_back(e);
    if (e["ph"] == "M" && e["name"] == "process_name") process = e["args"]["name"];
    if (e["ph"] == "M" && e["name"] == "process_labels") labels = e["args"]["labels"];
    if (e["ph"] == "M" && e["name"] == "thread_name") threads.insert({e["tid"].get<int>(), e["args"]["name"].get<std::string>()});
  }
  EXPECT_EQ(process, "rank 1");
  EXPECT_EQ(labels, "pp 1");
  EXPECT_EQ(threads, (std::set<std::pair<int, std::string>>{{0, "training loop"}, {1, "dp group (ranks 0,1)"}}));
  ASSERT_EQ(complete.size(), 3u);
  // Times in microseconds: 1500 ns -> 1.5 us, lasting 2.75 us.
  EXPECT_EQ(complete[0]["name"], "forward mb 0");
  EXPECT_EQ(complete[0]["cat"], "compute");
  EXPECT_EQ(complete[0]["tid"], 0);
  EXPECT_DOUBLE_EQ(complete[0]["ts"].get<double>(), 1.5);
  EXPECT_DOUBLE_EQ(complete[0]["dur"].get<double>(), 2.75);
  EXPECT_EQ(complete[0]["args"], (json{{"step", 2}, {"micro", 0}, {"chunk", 0}}));
  EXPECT_EQ(complete[1]["tid"], 1);
  EXPECT_EQ(complete[1]["args"]["bytes"], 4096);
  EXPECT_EQ(complete[2]["args"]["step"], 3);
}

TEST(ChromeTrace, MergeKeepsEveryRanksEventsInRankOrder) {
  std::vector<std::string> docs;
  for (int rank = 0; rank < 3; ++rank)
    docs.push_back(chrome_trace_json(sample_events(), {"training loop", "pp group (ranks 0,1,2)"},
                                     TraceProcess{rank, ""}, {{"rank", std::to_string(rank)}}));
  docs[1] += "   ";  // padding as it travels between ranks
  const json merged = json::parse(merge_chrome_traces(docs));
  std::vector<int> pids;
  std::size_t complete = 0, names = 0;
  for (const json& e : merged["traceEvents"]) {
    if (pids.empty() || pids.back() != e["pid"].get<int>()) pids.push_back(e["pid"]);
    if (e["ph"] == "X") ++complete;
    if (e["ph"] == "M" && e["name"] == "process_name") ++names;
  }
  EXPECT_EQ(pids, (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(complete, 9u);
  EXPECT_EQ(names, 3u);
  EXPECT_EQ(merged["otherData"]["rank"], "0") << "the leading rank's description";
}

TEST(ChromeTrace, MergeNamesAPartThatIsNotATrace) {
  const std::vector<std::string> docs = {chrome_trace_json({}, {"training loop"}, TraceProcess{0, ""}),
                                         "{\"traceEvents\": [", "{\"other\": 1}"};
  for (std::size_t bad : {1u, 2u}) {
    try {
      merge_chrome_traces({docs[0], docs[bad]});
      ADD_FAILURE() << "merged a broken part";
    } catch (const UserError& e) {
      EXPECT_NE(std::string(e.what()).find("trace part 1 of 2"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace ustrain
