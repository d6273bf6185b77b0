// The run directory's record of the sessions that trained it, written by the leading rank:
//   train.log  the console log, appended by every session (a new start or --overwrite begins
//              it afresh), with the message of an error that ends a session
//   run.json   one entry per session: ustrain version and build (git commit), command line,
//              launcher, every rank's host, process id and local rank, the checkpoint it resumed
//              from, start and end times (UTC) and how it ended ("running" until it does:
//              "completed", "stopped by SIGTERM", ..., or "error" with the message); under
//              parallel.layout = "auto" also the layout the planner chose (`auto_layout`)
// A session killed outright (SIGKILL, a node failure) keeps "running" and no end time. While a
// session runs, a hidden file (.run.json.room) holds back room to write its end even when the
// disk has filled.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "parallel/comm/communicator.h"
#include "parallel/launch.h"

namespace spdlog {
class logger;
namespace sinks {
class sink;
}
}  // namespace spdlog

namespace ustrain {

struct SessionStart {
  std::string run_dir;
  bool fresh = true;                      // a new start: replaces an earlier run's files
  ProcessInfo launch;                     // this rank's
  std::string resumed_from;               // "" for a new start
  nlohmann::json auto_layout;             // parallel.layout = "auto": the layout chosen and why; null otherwise
};

class RunRecord {
 public:
  RunRecord() = default;  // records nothing until started
  ~RunRecord();           // stops copying the log
  RunRecord(const RunRecord&) = delete;
  RunRecord& operator=(const RunRecord&) = delete;

  // Collective over `world` (every rank's host, pid and local rank are gathered); on the
  // leading rank, starts copying the console log into train.log and writes the session into
  // run.json.
  void start(const SessionStart& session, Communicator& world, bool leads);
  // Writes the session's end; `error` (for status "error") is also appended to train.log.
  // Does nothing before start() or on other ranks, and never throws: the run's own outcome
  // matters more than its record.
  void finish(const std::string& status, std::int64_t last_step, const std::string& error = "");

 private:
  void write_json();
  void keep_room(std::size_t json_bytes);

  std::string dir_;
  nlohmann::json record_;  // the whole of run.json
  std::shared_ptr<spdlog::sinks::sink> log_sink_;
  std::shared_ptr<spdlog::logger> log_only_;  // writes into train.log alone
};

}  // namespace ustrain
