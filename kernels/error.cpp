#include "kernels/error.h"

namespace ustrain {

std::string abbreviate(std::string_view text, std::size_t longest) {
  if (text.size() <= longest) return std::string(text);
  std::size_t cut = 60;
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;  // a continuation byte
  return std::string(text.substr(0, cut)) + "... (" + std::to_string(text.size()) + " bytes)";
}

void assertion_failed(const char* expr, const char* file, int line, const std::string& msg) {
  throw std::logic_error(std::string("internal error: ") + file + ":" + std::to_string(line) +
                         ": assertion `" + expr + "` failed" + (msg.empty() ? "" : ": " + msg));
}

}  // namespace ustrain
