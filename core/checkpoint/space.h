// Before the first step: can this run save its checkpoints? A checkpoint directory that is
// a file, read-only or on a full disk would otherwise surface only at the first save, after
// hours of training that then cannot be kept.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace ustrain {

// Creates `root` if needed and writes and removes a probe file in it. UserError naming the
// path and the cause when it is not a directory or cannot be written.
void check_checkpoint_directory(const std::string& root);

struct SpaceCheck {
  std::string error;    // non-empty: not even one checkpoint fits
  std::string warning;  // non-empty: fewer than two fit
};

// One checkpoint of `checkpoint_bytes` against `free_bytes` on the filesystem of `root`.
SpaceCheck check_space(const std::string& root, std::uint64_t checkpoint_bytes, std::uint64_t free_bytes);

// The bytes an unprivileged writer may still use on the filesystem of `path`; nullopt when
// it cannot be asked.
std::optional<std::uint64_t> free_bytes(const std::string& path);

// check_space against free_bytes(root): UserError, or a warning on the log.
void check_checkpoint_space(const std::string& root, std::uint64_t checkpoint_bytes);

}  // namespace ustrain
