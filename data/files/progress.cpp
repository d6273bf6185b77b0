#include "data/files/progress.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>

#include <fmt/format.h>

namespace ustrain {
namespace {

std::string format_bytes(double bytes) {
  constexpr const char* kUnits[] = {"kB", "MB", "GB", "TB"};
  if (bytes < 1000) return fmt::format("{:.0f} B", bytes);
  int unit = 0;
  bytes /= 1000;
  while (bytes >= 1000 && unit < 3) {
    bytes /= 1000;
    ++unit;
  }
  return fmt::format("{:.1f} {}", bytes, kUnits[unit]);
}

std::string format_amount(const ProgressOptions& options, double amount) {
  return options.unit == ProgressUnit::bytes ? format_bytes(amount)
                                             : fmt::format("{:.0f} {}", amount, options.item_name);
}

std::string format_rate(const ProgressOptions& options, double per_second) {
  return options.unit == ProgressUnit::bytes ? format_bytes(per_second) + "/s"
                                             : fmt::format("{:.1f} {}/s", per_second, options.item_name);
}

// "m:ss", or "h:mm:ss" from one hour on.
std::string format_duration(double seconds) {
  const auto total = static_cast<std::int64_t>(std::llround(std::max(seconds, 0.0)));
  const std::int64_t hours = total / 3600, minutes = total / 60 % 60, secs = total % 60;
  return hours > 0 ? fmt::format("{}:{:02d}:{:02d}", hours, minutes, secs)
                   : fmt::format("{}:{:02d}", minutes, secs);
}

}  // namespace

std::string format_progress_line(const ProgressOptions& options, std::int64_t done,
                                 double elapsed_seconds) {
  std::string line = options.label + ": ";
  if (options.total > 0) {
    // Items print as "3 / 10 documents" rather than repeating the name.
    line += options.unit == ProgressUnit::bytes
                ? fmt::format("{} / {}", format_bytes(double(done)), format_bytes(double(options.total)))
                : fmt::format("{} / {}", done, format_amount(options, double(options.total)));
    line += fmt::format(" ({}%)", done * 100 / options.total);
  } else {
    line += format_amount(options, double(done));
  }
  if (elapsed_seconds > 0) line += ", " + format_rate(options, double(done) / elapsed_seconds);
  line += ", elapsed " + format_duration(elapsed_seconds);
  if (options.total > 0 && done > 0 && done < options.total)
    line += ", ETA " + format_duration(elapsed_seconds * double(options.total - done) / double(done));
  return line;
}

ProgressReporter::ProgressReporter(std::FILE* out, ProgressOptions options)
    : options_(std::move(options)), out_(out) {
  terminal_ = options_.style == ProgressStyle::terminal ||
              (options_.style == ProgressStyle::automatic && out_ && ::isatty(::fileno(out_)));
  start_ = now();
  // A terminal shows the first update at once; a log waits one interval.
  last_print_ = terminal_ ? start_ - options_.terminal_interval_seconds : start_;
}

ProgressReporter::ProgressReporter(std::function<void(const std::string&)> line_sink,
                                   ProgressOptions options)
    : options_(std::move(options)), line_sink_(std::move(line_sink)) {
  start_ = now();
  last_print_ = start_;
}

ProgressReporter::~ProgressReporter() {
  if (terminal_ && terminal_width_used_ > 0 && !finished_) {
    std::fputc('\n', out_);
    std::fflush(out_);
  }
}

double ProgressReporter::now() const {
  if (options_.clock) return options_.clock();
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

void ProgressReporter::update(std::int64_t done) {
  done_ = done;
  const double t = now();
  const double interval = terminal_ ? options_.terminal_interval_seconds : options_.log_interval_seconds;
  if (t - last_print_ < interval) return;
  last_print_ = t;
  print(format_progress_line(options_, done_, t - start_));
}

void ProgressReporter::finish() {
  if (finished_) return;
  print(format_progress_line(options_, done_, now() - start_));
  finished_ = true;
  if (terminal_) {
    std::fputc('\n', out_);
    std::fflush(out_);
  }
}

void ProgressReporter::print(const std::string& line) {
  if (line_sink_) {
    line_sink_(line);
  } else if (out_ && terminal_) {
    // Pad with spaces to wipe the end of a longer previous line.
    const std::size_t pad = terminal_width_used_ > line.size() ? terminal_width_used_ - line.size() : 0;
    std::fprintf(out_, "\r%s%*s", line.c_str(), static_cast<int>(pad), "");
    terminal_width_used_ = line.size();
    std::fflush(out_);
  } else if (out_) {
    std::fprintf(out_, "%s\n", line.c_str());
    std::fflush(out_);
  }
}

}  // namespace ustrain
