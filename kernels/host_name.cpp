#include "kernels/host_name.h"

#include <limits.h>
#include <unistd.h>

namespace ustrain {

std::string host_name() {
  char name[HOST_NAME_MAX + 1] = {};
  if (::gethostname(name, sizeof name - 1) != 0 || name[0] == '\0') return "localhost";
  return name;
}

}  // namespace ustrain
