// Opening a file a user named (or a file inside a directory a user named) for reading. Only a
// regular file is opened: opening a FIFO blocks until some other process writes to it, forever
// when none does, and a directory, socket or device is never the file that was meant. Each is
// refused with a message naming the path and what it is.
#pragma once

#include <cstdint>
#include <string>

namespace ustrain {

struct OpenedFile {
  int fd = -1;             // read-only, close-on-exec; the caller closes it
  std::uint64_t bytes = 0;  // the file's size when it was opened
};

// The regular file `path`, opened; a UserError naming the path when it cannot be opened or is
// not a regular file.
OpenedFile open_regular_file(const std::string& path);

// The whole contents of the regular file `path`; a UserError naming it otherwise.
std::string read_regular_file(const std::string& path);

// What a file of st_mode `mode` is, for messages: "a symbolic link", "a FIFO (named pipe)", ...
const char* file_kind(unsigned mode);

}  // namespace ustrain
