#include "data/files/path_status.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>

namespace ustrain {

PathStatus path_status(const std::string& path) {
  struct stat info {};
  if (::stat(path.c_str(), &info) == 0) return {};
  const int error = errno;
  if (error == ENOENT || error == ENOTDIR) return {PathAccess::missing, {}};
  return {PathAccess::unreachable, std::strerror(error)};
}

std::string describe_unusable(const PathStatus& status) {
  switch (status.access) {
    case PathAccess::exists: return "";
    case PathAccess::missing: return "does not exist";
    case PathAccess::unreachable: return "cannot be accessed (" + status.cause + ")";
  }
  return "";
}

}  // namespace ustrain
