#include "core/distributed/parallelize.h"

#include <algorithm>
#include <string_view>

namespace ustrain {
namespace {

constexpr std::string_view kRouterSuffix = ".mlp.gate.weight";

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

}  // namespace

TpLayout tensor_parallel_layout(const std::string& name) {
  for (std::string_view column : {".q_proj.weight", ".k_proj.weight", ".v_proj.weight", ".gate_proj.weight",
                                  ".up_proj.weight"})
    if (ends_with(name, column)) return TpLayout::column_parallel;
  for (std::string_view row : {".o_proj.weight", ".down_proj.weight"})
    if (ends_with(name, row)) return TpLayout::row_parallel;
  if (name == kEmbeddingName || name == "lm_head.weight") return TpLayout::vocab_parallel;
  if (ends_with(name, "norm.weight")) return TpLayout::replicated;  // input_layernorm, model.norm, ...
  if (ends_with(name, kRouterSuffix)) return TpLayout::replicated;  // an MoE layer's router
  USTRAIN_ASSERT(false, "no tensor-parallel placement for parameter " + name);
}

void parallelize(ParamRegistry& params, const ModelGeometry& g) {
  const std::int64_t tp = g.tp, r = g.tp_rank;
  bool first_stage = false;
  for (const ChunkSpan& c : g.chunks) first_stage |= c.embedding;
  for (std::size_t i = 0; i < params.specs().size(); ++i) {
    const ParamSpec& s = params.specs()[i];
    const int handle = static_cast<int>(i);
    switch (tensor_parallel_layout(s.name)) {
      case TpLayout::column_parallel: {
        const std::int64_t rows = s.shape[0] / tp;
        params.place(handle, TpLayout::column_parallel, Shape{rows, s.shape[1]}, {r * rows, 0}, Shape{rows, s.shape[1]},
                     false, true);
        break;
      }
      case TpLayout::row_parallel: {
        const std::int64_t cols = s.shape[1] / tp;
        params.place(handle, TpLayout::row_parallel, Shape{s.shape[0], cols}, {0, r * cols}, Shape{s.shape[0], cols},
                     false, true);
        break;
      }
      case TpLayout::vocab_parallel:
        params.place(handle, TpLayout::vocab_parallel, Shape{g.vocab_local, s.shape[1]},
                     {std::min(g.vocab_begin, s.shape[0]), 0}, Shape{g.vocab_valid, s.shape[1]}, false,
                     s.name != kEmbeddingName || first_stage);
        break;
      case TpLayout::replicated:
        // Norm gains see this rank's rows under sp (partial gradients); a router sees every row
        // on every rank (whole gradients).
        params.place(handle, TpLayout::replicated, s.shape, std::vector<std::int64_t>(s.shape.rank(), 0), s.shape,
                     g.sequence_parallel() && !ends_with(s.name, kRouterSuffix), r == 0);
        break;
    }
  }
}

}  // namespace ustrain
