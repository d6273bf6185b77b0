#include "core/model/recompute.h"

#include "kernels/error.h"

namespace ustrain {

Recompute parse_recompute(const std::string& name) {
  if (name == "none") return Recompute::none;
  if (name == "selective") return Recompute::selective;
  if (name == "full") return Recompute::full;
  throw UserError("train.recompute must be none, selective or full (got \"" + name + "\")");
}

const char* recompute_name(Recompute r) {
  switch (r) {
    case Recompute::none: return "none";
    case Recompute::selective: return "selective";
    case Recompute::full: return "full";
  }
  return "?";
}

}  // namespace ustrain
