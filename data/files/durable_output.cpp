#include "data/files/durable_output.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <climits>
#include <cstring>
#include <filesystem>
#include <optional>
#include <string_view>

#include <fmt/format.h>

#include "kernels/error.h"
#include "kernels/host_name.h"

namespace ustrain {
namespace fs = std::filesystem;

namespace {

fs::path normalized_absolute(const std::string& dir) {
  fs::path path = fs::absolute(fs::path(dir)).lexically_normal();
  if (!path.has_filename()) path = path.parent_path();  // "out/" names the directory "out"
  return path;
}

constexpr std::string_view kStagingMark = ".incomplete-";

// The host name as it goes into a file name: characters other than [A-Za-z0-9._] become '_'.
std::string file_name_host() {
  std::string host = host_name();
  for (char& c : host)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '_') c = '_';
  return host;
}

struct StagingOwner {
  std::string host;  // empty in names made by older versions
  pid_t pid = 0;
};

// The owner named by "<host>-<pid>" or "<pid>", the part of a staging name after its mark.
std::optional<StagingOwner> parse_owner(std::string_view rest) {
  const std::size_t dash = rest.rfind('-');
  const std::string_view digits = dash == std::string_view::npos ? rest : rest.substr(dash + 1);
  if (digits.empty() || digits.size() > 9 ||
      !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return std::nullopt;
  StagingOwner owner;
  owner.pid = static_cast<pid_t>(std::stol(std::string(digits)));
  if (dash != std::string_view::npos) owner.host = std::string(rest.substr(0, dash));
  return owner;
}

// kill(pid, 0) delivers nothing; it fails with ESRCH only when no such process exists
// (EPERM means it exists but belongs to another user).
bool process_alive(pid_t pid) { return pid <= 0 || ::kill(pid, 0) == 0 || errno != ESRCH; }

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
  staging_ = final_ + std::string(kStagingMark) + file_name_host() + "-" + std::to_string(::getpid());
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

std::vector<std::string> remove_stale_staging(const std::string& final_dir) {
  const fs::path target = normalized_absolute(final_dir);
  const std::string prefix = target.filename().string() + std::string(kStagingMark);
  const std::string here = file_name_host();
  std::vector<std::pair<fs::path, StagingOwner>> found;  // listed first: removing while listing is unsafe
  std::error_code error;
  for (fs::directory_iterator it(target.parent_path(), error), end; !error && it != end; it.increment(error)) {
    const std::string name = it->path().filename().string();
    if (!name.starts_with(prefix) || !it->is_directory(error)) continue;
    if (const auto owner = parse_owner(std::string_view(name).substr(prefix.size())))
      found.emplace_back(it->path(), *owner);
  }
  std::sort(found.begin(), found.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<std::string> lines;
  for (const auto& [path, owner] : found) {
    const bool local = owner.host.empty() || owner.host == here;
    if (local && owner.pid == ::getpid()) continue;  // our own name: StagedDirectory starts it afresh
    if (!local) {
      lines.push_back(fmt::format("note: kept {}: it was made on host {}, where ustrain cannot tell whether process "
                                  "{} still runs; delete it once that conversion is over",
                                  path.string(), owner.host, owner.pid));
    } else if (process_alive(owner.pid)) {
      lines.push_back(fmt::format("note: kept {}: its process {} still runs (another conversion into the same "
                                  "output?)",
                                  path.string(), owner.pid));
    } else {
      std::uintmax_t bytes = 0;
      for (fs::recursive_directory_iterator it(path, error), end; !error && it != end; it.increment(error))
        if (const std::uintmax_t size = it->is_regular_file(error) ? it->file_size(error) : 0; !error) bytes += size;
      fs::remove_all(path, error);
      lines.push_back(error ? fmt::format("note: could not remove {}, left by process {} that is gone: {}",
                                          path.string(), owner.pid, error.message())
                            : fmt::format("removed {} ({:.1f} MB), left by process {}, which was interrupted and is "
                                          "gone",
                                          path.string(), static_cast<double>(bytes) / 1e6, owner.pid));
      error.clear();
    }
  }
  return lines;
}

}  // namespace ustrain
