#include "data/durable_output.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include <fmt/format.h>

#include "kernels/error.h"

namespace ustrain {
namespace fs = std::filesystem;

namespace {

fs::path normalized_absolute(const std::string& dir) {
  fs::path path = fs::absolute(fs::path(dir)).lexically_normal();
  if (!path.has_filename()) path = path.parent_path();  // "out/" names the directory "out"
  return path;
}

void require_absent_or_empty(const fs::path& path, const std::string& shown) {
  std::error_code error;
  const fs::file_status status = fs::status(path, error);
  if (!fs::exists(status)) return;
  if (!fs::is_directory(status))
    throw UserError(fmt::format("output {} exists and is not a directory: choose another output path",
                                shown));
  if (!fs::is_empty(path, error))
    throw UserError(fmt::format(
        "output directory {} already exists and is not empty: choose another output path, or "
        "delete it first if you mean to replace it",
        shown));
}

}  // namespace

void fsync_path(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    throw UserError(fmt::format("cannot open {} to flush it to disk: {}", path, std::strerror(errno)));
  const int status = ::fsync(fd);
  const int error = errno;
  ::close(fd);
  // Some filesystems cannot fsync a directory (EINVAL); the files in it were synced already.
  if (status != 0 && error != EINVAL)
    throw UserError(fmt::format("cannot flush {} to disk: {}", path, std::strerror(error)));
}

StagedDirectory::StagedDirectory(const std::string& final_dir) {
  const fs::path target = normalized_absolute(final_dir);
  require_absent_or_empty(target, final_dir);
  std::error_code error;
  fs::create_directories(target.parent_path(), error);
  if (error)
    throw UserError(fmt::format("cannot create directory {}: {}", target.parent_path().string(),
                                error.message()));
  final_ = target.string();
  staging_ = final_ + ".incomplete-" + std::to_string(::getpid());
  // A directory of this name can only be left over from an earlier process with our pid.
  fs::remove_all(staging_, error);
  if (!fs::create_directory(staging_, error))
    throw UserError(fmt::format("cannot create directory {}: {}", staging_,
                                error ? error.message() : "it exists already"));
}

StagedDirectory::~StagedDirectory() {
  if (committed_) return;
  std::error_code ignored;
  fs::remove_all(staging_, ignored);
}

void StagedDirectory::commit() {
  fsync_path(staging_);
  std::error_code error;
  // rename(2) replaces an empty directory at the final path and refuses a non-empty one.
  fs::rename(staging_, final_, error);
  if (error)
    throw UserError(fmt::format("cannot move the finished dataset from {} to {}: {} (was {} "
                                "created meanwhile? choose another output path)",
                                staging_, final_, error.message(), final_));
  committed_ = true;
  fsync_path(fs::path(final_).parent_path().string());
}

}  // namespace ustrain
