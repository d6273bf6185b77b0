// Input files reached twice are read once: a symbolic link (or hard link) to a file already
// listed, a file named twice, or another file with the same bytes or, decompressed, content. A directory such as
// /usr/share/games/fortunes holds links beside the files they point to; reading both would
// count each document twice and could put one copy in training and the other in validation.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "data/inputs/input_files.h"

namespace ustrain {

struct DuplicateInput {
  std::string path;    // the file left out
  std::string reason;  // "a symbolic link to a/b", "the same content as a/c"
};

// `files` without the repeats, in their order; the first of each kept. The same file is told
// by device and inode (following links); the same content by size, then CRC-32 (data/files/crc32.h)
// of files of equal size, then their bytes compared. Empty files are never repeats. A
// compressed file and one named as it is without .gz / .zst (what `gzip -k` leaves) are
// compared by their decompressed content the same way.
std::vector<InputFile> drop_duplicate_inputs(const std::vector<InputFile>& files,
                                             std::vector<DuplicateInput>& dropped);

// "note: read once 2 files reached twice: a/x.u8 (a symbolic link to a/x), ...", naming at
// most `shown`; empty when none was dropped.
std::string describe_duplicates(const std::vector<DuplicateInput>& dropped, std::size_t shown = 10);

}  // namespace ustrain
