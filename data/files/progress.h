// Progress of long work (conversions, copies), readable both on a terminal and in a Slurm log.
// On a terminal one line is rewritten in place with '\r' a few times a second; in a log file
// (or through a callback) a plain line is written every few seconds, so logs stay short.
// Each line: "<label>: <done> / <total> (<percent>%), <rate>, elapsed <m:ss>, ETA <m:ss>".
#pragma once

#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>

namespace ustrain {

enum class ProgressUnit { bytes, items };
enum class ProgressStyle { automatic, terminal, log };  // automatic: terminal iff the FILE* is a TTY

struct ProgressOptions {
  std::string label;                  // e.g. "convert"
  std::int64_t total = 0;             // 0 when unknown: no percentage and no ETA
  ProgressUnit unit = ProgressUnit::items;
  std::string item_name = "items";    // what is counted, for ProgressUnit::items
  ProgressStyle style = ProgressStyle::automatic;
  double log_interval_seconds = 5.0;
  double terminal_interval_seconds = 0.2;
  std::function<double()> clock;      // seconds on a monotonic clock; empty: steady_clock
};

// One progress line (no '\r', no '\n'). Sizes in bytes use decimal units (kB, MB, GB, TB).
std::string format_progress_line(const ProgressOptions& options, std::int64_t done,
                                 double elapsed_seconds);

class ProgressReporter {
 public:
  // Writes to `out` (e.g. stderr) in the given style.
  ProgressReporter(std::FILE* out, ProgressOptions options);
  // Hands each line to `line_sink` in log style; an empty sink makes a silent reporter.
  ProgressReporter(std::function<void(const std::string&)> line_sink, ProgressOptions options);
  ProgressReporter(const ProgressReporter&) = delete;
  ProgressReporter& operator=(const ProgressReporter&) = delete;
  // Ends a rewritten terminal line, so that whatever is printed next starts on a fresh line.
  ~ProgressReporter();

  void advance(std::int64_t delta) { update(done_ + delta); }
  void update(std::int64_t done);
  // Prints the final line whatever the interval.
  void finish();

  std::int64_t done() const { return done_; }

 private:
  double now() const;
  void print(const std::string& line);

  ProgressOptions options_;
  std::FILE* out_ = nullptr;
  std::function<void(const std::string&)> line_sink_;
  bool terminal_ = false;
  double start_ = 0;
  double last_print_ = 0;
  std::int64_t done_ = 0;
  std::size_t terminal_width_used_ = 0;  // length of the line currently shown on the terminal
  bool finished_ = false;
};

}  // namespace ustrain
