// Progress lines: their wording, how often they are written, and '\r' only on terminals.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <vector>

#include "data/files/progress.h"

namespace ustrain {
namespace {

std::string contents_of(std::FILE* file) {
  std::rewind(file);
  std::string text;
  for (int c; (c = std::fgetc(file)) != EOF;) text.push_back(static_cast<char>(c));
  return text;
}

TEST(DataProgress, LineShowsAmountsRateElapsedAndEta) {
  ProgressOptions bytes;
  bytes.label = "convert";
  bytes.unit = ProgressUnit::bytes;
  bytes.total = 2'500'000;
  // 1.5 MB of 2.5 MB in 10 s: 150 kB/s, and the remaining 1.0 MB takes 6.67 s, shown as 0:07.
  EXPECT_EQ(format_progress_line(bytes, 1'500'000, 10.0),
            "convert: 1.5 MB / 2.5 MB (60%), 150.0 kB/s, elapsed 0:10, ETA 0:07");
  // Done: no ETA. 2.5 MB in 2 h 5 min 3 s is 333.2 B/s.
  EXPECT_EQ(format_progress_line(bytes, 2'500'000, 7503.0),
            "convert: 2.5 MB / 2.5 MB (100%), 333 B/s, elapsed 2:05:03");

  ProgressOptions items;
  items.label = "export";
  items.item_name = "tensors";
  EXPECT_EQ(format_progress_line(items, 12, 4.0), "export: 12 tensors, 3.0 tensors/s, elapsed 0:04");
  items.total = 48;
  EXPECT_EQ(format_progress_line(items, 12, 4.0),
            "export: 12 / 48 tensors (25%), 3.0 tensors/s, elapsed 0:04, ETA 0:12");
  EXPECT_EQ(format_progress_line(items, 0, 0.0), "export: 0 / 48 tensors (0%), elapsed 0:00");
}

TEST(DataProgress, LogStyleWritesAPlainLineEveryInterval) {
  double clock = 0;
  ProgressOptions options;
  options.label = "work";
  options.total = 100;
  options.log_interval_seconds = 5;
  options.clock = [&] { return clock; };
  std::vector<std::string> lines;
  ProgressReporter reporter([&](const std::string& line) { lines.push_back(line); }, options);
  for (int second = 1; second <= 12; ++second) {
    clock = second;
    reporter.advance(8);
  }
  ASSERT_EQ(lines.size(), 2u);  // at 5 s and 10 s
  EXPECT_EQ(lines[0], "work: 40 / 100 items (40%), 8.0 items/s, elapsed 0:05, ETA 0:08");
  EXPECT_EQ(lines[1], "work: 80 / 100 items (80%), 8.0 items/s, elapsed 0:10, ETA 0:03");
  reporter.finish();
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[2], "work: 96 / 100 items (96%), 8.0 items/s, elapsed 0:12, ETA 0:01");
  reporter.finish();
  EXPECT_EQ(lines.size(), 3u);
}

TEST(DataProgress, LogFileGetsWholeLinesWithoutCarriageReturns) {
  std::FILE* file = std::tmpfile();
  ASSERT_NE(file, nullptr);
  double clock = 0;
  ProgressOptions options;
  options.label = "copy";
  options.unit = ProgressUnit::bytes;
  options.clock = [&] { return clock; };
  {
    ProgressReporter reporter(file, options);  // a tmpfile is no TTY: log style
    clock = 6;
    reporter.update(3'000'000);
    reporter.finish();
  }
  EXPECT_EQ(contents_of(file), "copy: 3.0 MB, 500.0 kB/s, elapsed 0:06\n"
                               "copy: 3.0 MB, 500.0 kB/s, elapsed 0:06\n");
  std::fclose(file);
}

TEST(DataProgress, TerminalStyleRewritesOneLine) {
  std::FILE* file = std::tmpfile();
  ASSERT_NE(file, nullptr);
  double clock = 0;
  ProgressOptions options;
  options.label = "t";
  options.style = ProgressStyle::terminal;
  options.clock = [&] { return clock; };
  {
    ProgressReporter reporter(file, options);
    clock = 1;
    reporter.update(100);  // "t: 100 items, 100.0 items/s, elapsed 0:01"
    clock = 2;
    reporter.update(5);    // shorter: padded to wipe the longer line
  }                        // destroyed unfinished: the line is ended for what follows
  EXPECT_EQ(contents_of(file), "\rt: 100 items, 100.0 items/s, elapsed 0:01"
                               "\rt: 5 items, 2.5 items/s, elapsed 0:02    \n");
  std::fclose(file);
}

}  // namespace
}  // namespace ustrain
