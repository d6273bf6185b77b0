#include "core/checkpoint/faults.h"

#include <csignal>
#include <cstdlib>

namespace ustrain {

SaveFaults SaveFaults::from_environment() {
  SaveFaults f;
  const char* spec = std::getenv("USTRAIN_TEST_KILL_AT");
  if (spec == nullptr || *spec == '\0') return f;
  const std::string text(spec);
  const std::size_t colon = text.find(':');
  f.point_ = text.substr(0, colon);
  f.due_ = colon == std::string::npos ? 1 : std::atoll(text.c_str() + colon + 1);
  return f;
}

void SaveFaults::reached(std::string_view point) {
  if (point_.empty() || point != point_) return;
  if (++seen_ == due_) std::raise(SIGKILL);
}

}  // namespace ustrain
