#include "core/run/resource_usage.h"

#include <fstream>
#include <sstream>
#include <string>

namespace ustrain {

namespace {

// Reads a "Field:   1234 kB" line of /proc/self/status, in bytes; 0 if absent.
std::size_t status_field_bytes(const std::string& field) {
  std::ifstream status("/proc/self/status");
  const std::string prefix = field + ":";
  for (std::string line; std::getline(status, line);) {
    if (line.compare(0, prefix.size(), prefix) != 0) continue;
    std::istringstream rest(line.substr(prefix.size()));
    std::size_t kib = 0;
    std::string unit;
    if (rest >> kib >> unit && unit == "kB") return kib * 1024;
    return 0;
  }
  return 0;
}

}  // namespace

std::size_t peak_resident_bytes() { return status_field_bytes("VmHWM"); }

std::size_t current_resident_bytes() { return status_field_bytes("VmRSS"); }

}  // namespace ustrain
