#include "kernels/attention_mask.h"

#include <string>

#include "kernels/error.h"

namespace ustrain {

const char* mask_kind_name(AttentionMask::Kind kind) {
  switch (kind) {
    case AttentionMask::Kind::none: return "none";
    case AttentionMask::Kind::causal: return "causal";
  }
  return "unknown";
}

void require_implemented_mask(const AttentionMask& mask, const char* op) {
  const std::string where = std::string(op) + ": ";
  USTRAIN_ASSERT(mask.kind == AttentionMask::Kind::none || mask.kind == AttentionMask::Kind::causal,
                 where + "attention mask kind " + mask_kind_name(mask.kind) + " is not implemented");
  USTRAIN_ASSERT(!mask.has_window(), where + "a sliding window (AttentionMask::window = " +
                                         std::to_string(mask.window) + ") is not implemented");
  USTRAIN_ASSERT(!mask.has_documents(), where + "document ids (AttentionMask::q_documents, k_documents) are not "
                                                "implemented");
}

}  // namespace ustrain
