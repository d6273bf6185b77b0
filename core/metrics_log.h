// The run's metrics file: one JSON object per line (JSONL), appended as training goes.
#pragma once

#include <fstream>
#include <string>
#include <utility>
#include <vector>

namespace ustrain {

class MetricsLog {
 public:
  // Opens `path` for appending (a resumed run continues the same file). Throws UserError
  // naming the path if it cannot be opened.
  explicit MetricsLog(const std::string& path);

  // Appends {"kind": kind, <numbers in the given order>, "time": unix seconds} and flushes,
  // so nothing is lost if the process dies. Doubles are written to round-trip exactly;
  // integral values are written without a fraction ("step": 10); non-finite values as null.
  // Names must be unique and not "kind" or "time". Throws UserError if the write fails.
  void write(const std::string& kind, const std::vector<std::pair<std::string, double>>& numbers);

 private:
  std::string path_;
  std::ofstream out_;
};

}  // namespace ustrain
