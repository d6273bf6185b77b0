#include "core/checkpoint/dir.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <filesystem>

#include "core/checkpoint/format.h"
#include "data/files/durable_output.h"
#include "kernels/error.h"

namespace ustrain {
namespace fs = std::filesystem;
namespace {

constexpr std::string_view kPrefix = "step-";
constexpr const char* kLatest = "latest";

// The step of a directory named exactly "step-<digits>", else nullopt.
std::optional<std::int64_t> step_of(const std::string& name) {
  if (name.size() <= kPrefix.size() || name.compare(0, kPrefix.size(), kPrefix) != 0) return std::nullopt;
  std::int64_t step = 0;
  const char* begin = name.data() + kPrefix.size();
  const char* end = name.data() + name.size();
  const auto [at, error] = std::from_chars(begin, end, step);
  if (error != std::errc() || at != end || step < 0) return std::nullopt;
  return step;
}

bool ends_with(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

void rename_or_throw(const fs::path& from, const fs::path& to) {
  std::error_code ec;
  fs::rename(from, to, ec);
  if (ec) throw UserError(fmt::format("cannot rename {} to {}: {}", from.string(), to.string(), ec.message()));
}

}  // namespace

CheckpointDirectory::CheckpointDirectory(std::string root) : root_(std::move(root)) {}

std::string CheckpointDirectory::name_of(std::int64_t step) { return fmt::format("step-{:08}", step); }

std::string CheckpointDirectory::path_of(std::int64_t step) const { return root_ + "/" + name_of(step); }

std::vector<std::int64_t> CheckpointDirectory::complete_steps() const {
  std::vector<std::int64_t> steps;
  std::error_code ec;
  for (fs::directory_iterator it(root_, ec), end; !ec && it != end; it.increment(ec)) {
    const auto step = step_of(it->path().filename().string());
    if (step && fs::is_regular_file(it->path() / kManifestName)) steps.push_back(*step);
  }
  std::sort(steps.begin(), steps.end());
  return steps;
}

std::optional<std::string> CheckpointDirectory::newest() const {
  const auto steps = complete_steps();
  if (steps.empty()) return std::nullopt;
  return path_of(steps.back());
}

void CheckpointDirectory::remove_leftovers() const {
  std::error_code ec;
  if (!fs::is_directory(root_, ec)) return;
  std::vector<fs::path> stale;
  for (fs::directory_iterator it(root_, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (ends_with(name, ".tmp") || ends_with(name, ".deleting")) stale.push_back(it->path());
  }
  for (const fs::path& p : stale) fs::remove_all(p, ec);
  // A save killed between publishing and re-pointing `latest` leaves it one behind.
  const auto steps = complete_steps();
  const fs::path target = fs::read_symlink(fs::path(root_) / kLatest, ec);
  const bool current = !steps.empty() && !ec && target == fs::path(name_of(steps.back()));
  if (!current) point_latest_at(steps.empty() ? std::nullopt : std::optional(steps.back()));
}

std::string CheckpointDirectory::stage(std::int64_t step) const {
  std::error_code ec;
  fs::create_directories(root_, ec);
  if (ec) throw UserError(fmt::format("cannot create checkpoint directory {}: {}", root_, ec.message()));
  const std::string staging = staging_path(step);
  fs::remove_all(staging, ec);
  if (!fs::create_directory(staging, ec))
    throw UserError(fmt::format("cannot create {}: {}", staging, ec ? ec.message() : "it exists"));
  return staging;
}

void CheckpointDirectory::publish(std::int64_t step, SaveFaults& faults) const {
  const std::string final_path = path_of(step);
  USTRAIN_ASSERT(!fs::exists(final_path), "checkpoint " + final_path + " exists already");
  fsync_path(final_path + ".tmp");
  rename_or_throw(final_path + ".tmp", final_path);
  fsync_path(root_);
  faults.reached("publish");
  point_latest_at(step);
  faults.reached("latest");
}

void CheckpointDirectory::point_latest_at(const std::optional<std::int64_t>& step) const {
  const fs::path latest = fs::path(root_) / kLatest;
  std::error_code ec;
  if (!step) {
    fs::remove(latest, ec);
    return;
  }
  const fs::path staged = fs::path(root_) / "latest.tmp";
  fs::remove(staged, ec);
  fs::create_symlink(name_of(*step), staged, ec);
  if (ec) throw UserError(fmt::format("cannot create the symlink {}: {}", staged.string(), ec.message()));
  rename_or_throw(staged, latest);  // replaces the old link atomically
  fsync_path(root_);
}

std::vector<std::int64_t> CheckpointDirectory::retain(std::int64_t keep_last, std::int64_t keep_every,
                                                      SaveFaults& faults) const {
  const auto steps = complete_steps();
  std::vector<std::int64_t> removed;
  for (std::size_t i = 0; i < steps.size(); ++i) {
    const bool recent = static_cast<std::int64_t>(steps.size() - i) <= keep_last;
    const bool permanent = keep_every > 0 && steps[i] % keep_every == 0;
    if (recent || permanent) continue;
    const std::string doomed = path_of(steps[i]) + ".deleting";
    rename_or_throw(path_of(steps[i]), doomed);
    faults.reached("retention");
    std::error_code ec;
    fs::remove_all(doomed, ec);
    removed.push_back(steps[i]);
  }
  return removed;
}

std::vector<std::int64_t> CheckpointDirectory::set_aside_after(std::int64_t step, bool inclusive) const {
  const auto steps = complete_steps();
  std::vector<std::int64_t> moved, kept;
  for (std::int64_t s : steps) (s > step || (inclusive && s == step) ? moved : kept).push_back(s);
  if (moved.empty()) return moved;
  // Re-point `latest` first, so that it never names a directory that is being moved.
  point_latest_at(kept.empty() ? std::nullopt : std::optional(kept.back()));
  const fs::path aside = fs::path(root_) / "abandoned";
  std::error_code ec;
  fs::create_directories(aside, ec);
  for (std::int64_t s : moved) {
    fs::path target = aside / name_of(s);
    for (int n = 1; fs::exists(target); ++n) target = aside / fmt::format("{}.{}", name_of(s), n);
    rename_or_throw(path_of(s), target);
  }
  fsync_path(root_);
  return moved;
}

void CheckpointDirectory::remove_all() const {
  std::error_code ec;
  fs::remove_all(root_, ec);
  if (ec) throw UserError(fmt::format("cannot delete the old checkpoints in {}: {}", root_, ec.message()));
}

}  // namespace ustrain
