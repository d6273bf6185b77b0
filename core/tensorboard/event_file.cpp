#include "core/tensorboard/event_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <vector>

#include <fmt/format.h>

#include "core/tensorboard/event.pb.h"
#include "core/tensorboard/tfrecord.h"
#include "kernels/error.h"
#include "kernels/host_name.h"

namespace ustrain {
namespace {

namespace tb = ustrain::tensorboard;

constexpr std::string_view kNamePrefix = "events.out.tfevents.";
// From version 2 on, TensorBoard takes a SessionLog START as the sign of a restart rather than
// guessing restarts from steps that go backwards.
constexpr const char* kFileVersion = "brain.Event:2";
// More runs than this starting in one second on one host is a loop, not a workload.
constexpr int kMaxNameSuffix = 1000;

double unix_seconds_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace

EventFile::EventFile(const std::string& dir, std::int64_t first_step) {
  const double now = unix_seconds_now();
  const std::string base =
      fmt::format("{}/{}{}.{}", dir, kNamePrefix, static_cast<std::int64_t>(now), host_name());
  for (int suffix = 0; fd_ < 0; ++suffix) {
    path_ = suffix == 0 ? base : fmt::format("{}.{}", base, suffix);
    fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    const int error = errno;
    if (fd_ < 0 && (error != EEXIST || suffix == kMaxNameSuffix))
      throw UserError(fmt::format("cannot create TensorBoard event file '{}': {}; check that its directory "
                                  "exists and is writable, or set log.tensorboard = false",
                                  path_, std::strerror(error)));
  }
  tb::Event version;
  version.set_wall_time(now);
  version.set_file_version(kFileVersion);
  tb::Event start;
  start.set_wall_time(now);
  start.set_step(first_step);
  start.mutable_session_log()->set_status(tb::SessionLog::START);
  try {
    append(version.SerializeAsString());
    append(start.SerializeAsString());
  } catch (...) {
    ::close(fd_);  // no destructor runs for an object whose constructor throws
    throw;
  }
}

EventFile::~EventFile() {
  if (fd_ >= 0) ::close(fd_);
}

void EventFile::write_scalars(std::int64_t step, double wall_time,
                              const std::vector<std::pair<std::string, double>>& scalars) {
  tb::Event event;
  event.set_wall_time(wall_time);
  event.set_step(step);
  tb::Summary* summary = event.mutable_summary();
  for (const auto& [tag, value] : scalars) {
    tb::Summary::Value* v = summary->add_value();
    v->set_tag(tag);
    v->set_simple_value(static_cast<float>(value));
  }
  append(event.SerializeAsString());
}

void EventFile::append(const std::string& serialized_event) {
  const std::string record = tfrecord_frame(serialized_event);
  std::size_t written = 0;
  while (written < record.size()) {
    const ssize_t n = ::write(fd_, record.data() + written, record.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int error = n < 0 ? errno : EIO;
      throw UserError(fmt::format("cannot write to TensorBoard event file '{}': {} (is the disk full?)", path_,
                                  std::strerror(error)));
    }
    written += static_cast<std::size_t>(n);
  }
}

bool is_event_file_name(std::string_view file_name) { return file_name.starts_with(kNamePrefix); }

void remove_event_files(const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return;  // no run directory yet: nothing to remove
  std::vector<fs::path> found;  // listed first: removing while iterating may skip entries
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
    if (is_event_file_name(it->path().filename().string())) found.push_back(it->path());
  if (ec) throw UserError(fmt::format("cannot list {} to remove its TensorBoard event files: {}", dir, ec.message()));
  for (const fs::path& file : found)
    if (!fs::remove(file, ec) && ec)
      throw UserError(fmt::format("cannot remove the earlier run's TensorBoard event file '{}': {}", file.string(),
                                  ec.message()));
}

}  // namespace ustrain
