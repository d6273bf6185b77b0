#include "data/files/json_input.h"

#include <fmt/format.h>

#include "kernels/error.h"

namespace ustrain {
namespace {

using Json = nlohmann::json;

struct TooDeep {};

// The parser calls this at every event with the number of containers open around it; an
// object or array opened at depth kMaxJsonDepth would be level kMaxJsonDepth + 1.
bool within_depth(int depth, Json::parse_event_t event, Json& /*parsed*/) {
  const bool opens = event == Json::parse_event_t::object_start || event == Json::parse_event_t::array_start;
  if (opens && depth >= kMaxJsonDepth) throw TooDeep{};
  return true;
}

}  // namespace

Json parse_json(std::string_view text, const std::string& source) {
  try {
    return Json::parse(text, within_depth);
  } catch (const TooDeep&) {
    throw UserError(fmt::format("{}: JSON nested more than {} levels deep; no file ustrain reads nests that deeply, "
                                "so this one is damaged or forged: use the original file",
                                source, kMaxJsonDepth));
  }
}

Json parse_json_or_discarded(std::string_view text) {
  try {
    return Json::parse(text, within_depth, /*allow_exceptions=*/false);
  } catch (const TooDeep&) {
    return Json(Json::value_t::discarded);
  }
}

}  // namespace ustrain
