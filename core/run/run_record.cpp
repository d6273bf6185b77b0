#include "core/run/run_record.h"

#include <fmt/chrono.h>
#include <fmt/format.h>
#include <spdlog/sinks/base_sink.h>
#include <spdlog/spdlog.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <mutex>

#include "core/run/build_info.h"
#include "core/checkpoint/fs.h"
#include "core/run/run_file.h"
#include "data/files/json_input.h"
#include "kernels/error.h"
#include "kernels/host_name.h"

namespace ustrain {
namespace {

namespace fs = std::filesystem;

constexpr std::size_t kHostBytes = 64;  // a host name as gathered (longer ones are cut)
constexpr const char* kLogPattern = "%Y-%m-%d %H:%M:%S %l %v";
constexpr const char* kRoomName = ".run.json.room";
constexpr std::size_t kRoomSlackBytes = 64 * 1024;

// train.log, appended to without following a link (core/run/run_file.h).
class RunLogSink final : public spdlog::sinks::base_sink<std::mutex> {
 public:
  explicit RunLogSink(const std::string& path) : file_(path, RunFile::Mode::append) {}

 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override {
    spdlog::memory_buf_t line;
    formatter_->format(msg, line);
    if (const int error = file_.write(std::string_view(line.data(), line.size())))
      throw spdlog::spdlog_ex("cannot write " + file_.path() + ": " + std::strerror(error));
  }
  void flush_() override {}  // every line is written as it comes

 private:
  RunFile file_;
};

std::string utc_now() {
  return fmt::format("{:%Y-%m-%dT%H:%M:%SZ}", fmt::gmtime(std::chrono::system_clock::to_time_t(
                                                   std::chrono::system_clock::now())));
}

// Every rank's host, pid and local rank, in rank order: each rank's row is kHostBytes / 4 words
// of host name, then the pid and the local rank.
nlohmann::json gather_ranks(Communicator& world, const ProcessInfo& launch) {
  constexpr std::size_t kWords = kHostBytes / 4 + 2;
  std::vector<std::uint32_t> mine(kWords, 0);
  const std::string host = host_name();
  std::memcpy(mine.data(), host.data(), std::min(host.size(), kHostBytes - 1));
  mine[kWords - 2] = static_cast<std::uint32_t>(getpid());
  mine[kWords - 1] = static_cast<std::uint32_t>(launch.local_rank);
  std::vector<std::uint32_t> all(kWords * static_cast<std::size_t>(world.size()));
  if (world.size() == 1) {
    all = mine;
  } else {
    world
        .all_gather(Tensor(all.data(), Shape{static_cast<std::int64_t>(all.size())}, DType::u32),
                    Tensor(mine.data(), Shape{static_cast<std::int64_t>(kWords)}, DType::u32))
        .wait();
  }
  nlohmann::json ranks = nlohmann::json::array();
  for (int r = 0; r < world.size(); ++r) {
    const std::uint32_t* row = all.data() + static_cast<std::size_t>(r) * kWords;
    const char* name = reinterpret_cast<const char*>(row);
    ranks.push_back({{"rank", r},
                     {"host", std::string(name, strnlen(name, kHostBytes))},
                     {"pid", row[kWords - 2]},
                     {"local_rank", row[kWords - 1]}});
  }
  return ranks;
}

// This process's arguments, as the kernel holds them (/proc/self/cmdline); empty where unknown.
std::vector<std::string> command_line() {
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  std::vector<std::string> args;
  for (std::string arg; std::getline(in, arg, '\0');) args.push_back(arg);
  return args;
}

// run.json as an earlier session left it; a fresh object when there is none or it is unreadable.
nlohmann::json earlier_record(const std::string& path) {
  std::ifstream in(path);
  if (!in) return nlohmann::json::object();
  const std::string text{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  nlohmann::json record = parse_json_or_discarded(text);
  if (record.is_object() && record.contains("sessions") && record["sessions"].is_array()) return record;
  spdlog::warn("{} is not a run record of ustrain; starting it again", path);
  return nlohmann::json::object();
}

}  // namespace

RunRecord::~RunRecord() {
  if (!log_sink_) return;
  auto& sinks = spdlog::default_logger()->sinks();
  sinks.erase(std::remove(sinks.begin(), sinks.end(), log_sink_), sinks.end());
}

void RunRecord::start(const SessionStart& session, Communicator& world, bool leads) {
  nlohmann::json ranks = gather_ranks(world, session.launch);
  if (!leads) return;
  dir_ = session.run_dir;
  const std::string log_path = dir_ + "/train.log";
  std::error_code ec;
  if (session.fresh) {
    fs::remove(log_path, ec);
    fs::remove(dir_ + "/run.json", ec);
  }
  log_sink_ = std::make_shared<RunLogSink>(log_path);
  log_sink_->set_pattern(kLogPattern);
  spdlog::default_logger()->sinks().push_back(log_sink_);
  log_only_ = std::make_shared<spdlog::logger>("train.log", log_sink_);
  log_only_->flush_on(spdlog::level::trace);

  record_ = earlier_record(dir_ + "/run.json");
  record_["run"] = fs::path(dir_).filename().string();
  fs::remove(dir_ + "/" + kRoomName, ec);  // left by a session killed outright
  record_["sessions"].push_back({
      {"ustrain_version", build_version()},
      {"build", {{"git_commit", build_git_commit()}, {"build_type", build_type()}, {"cuda", build_has_cuda()}}},
      {"command_line", command_line()},
      {"working_directory", fs::current_path(ec).string()},
      {"launcher", session.launch.launcher},
      {"world_size", session.launch.world_size},
      {"ranks", std::move(ranks)},
      {"resumed_from", session.resumed_from.empty() ? nlohmann::json() : nlohmann::json(session.resumed_from)},
      {"start_time", utc_now()},
      {"end_time", nullptr},
      {"last_step", nullptr},
      {"status", "running"},
  });
  if (!session.auto_layout.is_null()) record_["sessions"].back()["auto_layout"] = session.auto_layout;
  write_json();
  keep_room(record_.dump(2).size());
}

void RunRecord::finish(const std::string& status, std::int64_t last_step, const std::string& error) {
  if (dir_.empty()) return;
  std::error_code ec;
  fs::remove(dir_ + "/" + kRoomName, ec);  // the room to write run.json on a full disk
  try {
    nlohmann::json& session = record_["sessions"].back();
    session["end_time"] = utc_now();
    session["status"] = status;
    if (last_step >= 0) session["last_step"] = last_step;
    if (!error.empty()) session["error"] = error;
    write_json();
  } catch (const std::exception& e) {
    spdlog::warn("could not record the end of the session in {}/run.json: {}", dir_, e.what());
  }
  // After run.json: on a full disk this line may not fit.
  if (!error.empty()) log_only_->error("{}", error);
  dir_.clear();
}

// A file of twice run.json's size and more, taken at the start and given back just before the
// session's end is written, so that a run that stops because its disk filled can still record
// why. Best effort: a filesystem without room for it at the start goes without.
void RunRecord::keep_room(std::size_t json_bytes) {
  const std::string path = dir_ + "/" + kRoomName;
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (fd < 0) return;
  const auto bytes = static_cast<off_t>(2 * json_bytes + kRoomSlackBytes);
  const bool kept = ::posix_fallocate(fd, 0, bytes) == 0;
  ::close(fd);
  std::error_code ec;
  if (!kept) fs::remove(path, ec);
}

void RunRecord::write_json() {
  // Whole or not at all: a reader never sees half a file.
  const std::string path = dir_ + "/run.json";
  write_run_file(path + ".tmp", record_.dump(2) + "\n", /*durable=*/true);
  std::error_code ec;
  fs::rename(path + ".tmp", path, ec);
  if (ec) throw UserError(fmt::format("cannot replace {}: {}", path, ec.message()));
}

}  // namespace ustrain
