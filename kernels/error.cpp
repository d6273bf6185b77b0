#include "kernels/error.h"

namespace ustrain {

void assertion_failed(const char* expr, const char* file, int line, const std::string& msg) {
  throw std::logic_error(std::string("internal error: ") + file + ":" + std::to_string(line) +
                         ": assertion `" + expr + "` failed" + (msg.empty() ? "" : ": " + msg));
}

}  // namespace ustrain
