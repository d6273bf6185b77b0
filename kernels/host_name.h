// This machine's host name, for messages and records that say where a process runs.
#pragma once

#include <string>

namespace ustrain {

// gethostname(2), or "localhost" when the system gives none.
std::string host_name();

}  // namespace ustrain
