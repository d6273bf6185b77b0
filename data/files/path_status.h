// Whether a path the user named can be looked at, telling "it does not exist" apart from "it
// cannot be reached" (a directory on the way without search permission, a name too long):
// the fixes differ, so the messages must.
#pragma once

#include <string>

namespace ustrain {

enum class PathAccess { exists, missing, unreachable };

struct PathStatus {
  PathAccess access = PathAccess::exists;
  std::string cause;  // the system's words when unreachable, e.g. "Permission denied"
};

PathStatus path_status(const std::string& path);

// "does not exist" or "cannot be accessed (Permission denied)", for messages about a path
// that is not usable; empty when it exists.
std::string describe_unusable(const PathStatus& status);

}  // namespace ustrain
