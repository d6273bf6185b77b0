// This process's memory use, as the kernel reports it (Linux /proc/self/status).
#pragma once

#include <cstddef>

namespace ustrain {

// Largest resident set size so far (VmHWM), in bytes; 0 where the system does not report it.
std::size_t peak_resident_bytes();

// Resident set size now (VmRSS), in bytes; 0 where the system does not report it.
std::size_t current_resident_bytes();

}  // namespace ustrain
