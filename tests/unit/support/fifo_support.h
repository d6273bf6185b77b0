// Reading a FIFO that nobody writes to: the reader must refuse it at once. A reader that waits
// on it instead is released after a while (a writer opens and closes the other end, so the
// test ends) and reported as a failure.
#pragma once

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <functional>
#include <future>
#include <string>

#include "kernels/error.h"

namespace ustrain::test {

inline void make_fifo(const std::string& path) { ASSERT_EQ(::mkfifo(path.c_str(), 0644), 0) << path; }

// The message of the UserError `read` throws on the FIFO `fifo` (empty when it throws none).
inline std::string error_reading_fifo(const std::string& fifo, const std::function<void()>& read) {
  auto reading = std::async(std::launch::async, [&]() -> std::string {
    try {
      read();
    } catch (const UserError& e) {
      return e.what();
    }
    return "";
  });
  if (reading.wait_for(std::chrono::seconds(20)) != std::future_status::ready) {
    ADD_FAILURE() << "reading the FIFO " << fifo << " waited for a writer";
    const int writer = ::open(fifo.c_str(), O_WRONLY | O_NONBLOCK);  // lets the blocked open return
    if (writer >= 0) ::close(writer);
  }
  return reading.get();
}

}  // namespace ustrain::test
