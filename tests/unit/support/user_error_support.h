// Checks of the messages users get: what an action threw, and that a message names what it
// should.
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "kernels/error.h"

namespace ustrain {

// The message of the UserError `action` throws; a test failure and "" when it throws none.
inline std::string user_error_of(const std::function<void()>& action) {
  try {
    action();
  } catch (const UserError& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected a UserError";
  return "";
}

// Every part appears in the message.
inline void expect_mentions(const std::string& message, const std::vector<std::string>& parts) {
  for (const std::string& part : parts)
    EXPECT_NE(message.find(part), std::string::npos) << "expected \"" << part << "\" in:\n  " << message;
}

// The UserError `action` throws names every part.
inline void expect_error_mentions(const std::function<void()>& action, const std::vector<std::string>& parts) {
  expect_mentions(user_error_of(action), parts);
}

}  // namespace ustrain
