// A conversion killed outright leaves its "<output>.incomplete-<host>-<pid>" directory behind;
// the next conversion into the same output removes those whose process is gone, and never one
// whose process still runs or that was made on another host.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "data/convert/convert.h"
#include "data/files/durable_output.h"
#include "tests/unit/data/test_support.h"

namespace ustrain {
namespace {

namespace fs = std::filesystem;

// The id of a process that has exited and been reaped.
pid_t dead_pid() {
  const pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  ::waitpid(child, nullptr, 0);
  return child;
}

// This host's part of staging names, as StagedDirectory writes it.
std::string this_host(const test::ScratchDir& scratch) {
  const StagedDirectory probe(scratch / "probe");
  const std::string name = fs::path(probe.path()).filename().string();  // probe.incomplete-<host>-<pid>
  const std::string rest = name.substr(std::string("probe.incomplete-").size());
  return rest.substr(0, rest.rfind('-'));
}

void make_leftover(const std::string& dir) { test::write_file(dir + "/train-00000.h5", std::string(1000, 'x')); }

std::size_t count_starting(const std::vector<std::string>& lines, const std::string& start) {
  return static_cast<std::size_t>(
      std::count_if(lines.begin(), lines.end(), [&](const std::string& line) { return line.starts_with(start); }));
}

TEST(DataDurableOutput, StagingOfAGoneProcessIsRemovedAndOfALiveOneKept) {
  test::ScratchDir scratch;
  const std::string host = this_host(scratch);
  const pid_t gone = dead_pid();
  const std::string out = scratch / "out";
  const std::string legacy = out + ".incomplete-" + std::to_string(gone);
  const std::string stale = out + ".incomplete-" + host + "-" + std::to_string(gone);
  const std::string live = out + ".incomplete-" + host + "-" + std::to_string(::getppid());
  const std::string remote = out + ".incomplete-elsewhere.example-" + std::to_string(gone);
  for (const std::string& dir : {legacy, stale, live, remote}) make_leftover(dir);
  make_leftover(out + ".incomplete-notapid");
  make_leftover(scratch / ("outer.incomplete-" + std::to_string(gone)));  // another output's
  test::write_file(out + ".incomplete-" + std::to_string(gone + 1), "a file, not a staging directory");

  const std::vector<std::string> lines = remove_stale_staging(out);
  EXPECT_FALSE(fs::exists(legacy));
  EXPECT_FALSE(fs::exists(stale));
  EXPECT_TRUE(fs::exists(live));
  EXPECT_TRUE(fs::exists(remote));
  EXPECT_TRUE(fs::exists(out + ".incomplete-notapid"));
  EXPECT_TRUE(fs::exists(scratch / ("outer.incomplete-" + std::to_string(gone))));
  EXPECT_TRUE(fs::exists(out + ".incomplete-" + std::to_string(gone + 1)));
  ASSERT_EQ(lines.size(), 4u) << fmt::format("{}", fmt::join(lines, "\n"));
  EXPECT_EQ(count_starting(lines, "removed " + legacy + " (0.0 MB), left by process"), 1u);
  EXPECT_EQ(count_starting(lines, "removed " + stale), 1u);
  const std::string parent = std::to_string(::getppid());
  EXPECT_EQ(count_starting(lines, "note: kept " + live + ": its process " + parent + " still runs"), 1u);
  EXPECT_EQ(count_starting(lines, "note: kept " + remote + ": it was made on host elsewhere.example"), 1u);
}

TEST(DataDurableOutput, AConversionClearsUpAfterAKilledOne) {
  test::ScratchDir scratch;
  test::write_file(scratch / "in.txt", "text\n");
  const std::string stale = scratch / ("out.incomplete-" + std::to_string(dead_pid()));
  make_leftover(stale);
  ConvertOptions options;
  options.inputs = {scratch / "in.txt"};
  options.output_dir = scratch / "out";
  options.val_fraction = 0;
  std::vector<std::string> messages;
  convert_dataset(options, [&](const std::string& line) { messages.push_back(line); });
  EXPECT_FALSE(fs::exists(stale));
  EXPECT_TRUE(fs::exists(scratch / "out/manifest.json"));
  EXPECT_EQ(count_starting(messages, "removed " + stale), 1u);
}

}  // namespace
}  // namespace ustrain
