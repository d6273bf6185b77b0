// Error kinds shared by every floor of ustrain.
//
// UserError: something the user can fix (recipe, layout, data, checkpoint, usage).
// The binary prints its message and exits with status 2. Anything else that escapes
// is an internal error (status 1). Internal invariants use USTRAIN_ASSERT.
#pragma once

#include <stdexcept>
#include <string>

namespace ustrain {

class UserError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

[[noreturn]] void assertion_failed(const char* expr, const char* file, int line, const std::string& msg);

}  // namespace ustrain

#define USTRAIN_ASSERT(cond, msg)                                               \
  do {                                                                          \
    if (!(cond)) ::ustrain::assertion_failed(#cond, __FILE__, __LINE__, (msg)); \
  } while (0)
