// Error kinds shared by every floor of ustrain.
//
// UserError: something the user can fix (recipe, layout, data, checkpoint, usage).
// The binary prints its message and exits with status 2. Anything else that escapes
// is an internal error (status 1). Internal invariants use USTRAIN_ASSERT.
#pragma once

#include <cstddef>
#include <stdexcept>
#include <string>
#include <string_view>

namespace ustrain {

class UserError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A value the user gave (a word, a token, a key, a value), shortened for a message: as it is
// up to `longest` bytes, else its first 60 (not cutting a UTF-8 character) and how long it is:
// "abcd... (1048576 bytes)". Every message that echoes what the user typed goes through it, so
// that a megabyte of input makes a line of error.
std::string abbreviate(std::string_view text, std::size_t longest = 80);

[[noreturn]] void assertion_failed(const char* expr, const char* file, int line, const std::string& msg);

}  // namespace ustrain

#define USTRAIN_ASSERT(cond, msg)                                               \
  do {                                                                          \
    if (!(cond)) ::ustrain::assertion_failed(#cond, __FILE__, __LINE__, (msg)); \
  } while (0)
