// The document length a plan prices document masking with (train.document_mask). The
// attention a step needs under the mask depends on where the documents of each window end,
// which only the data knows: the planner records its step with documents of one length, the
// mean the user gives (--document-tokens) or, when the recipe's dataset is there, its
// training split's mean (tokens / documents, from the manifest). Without either, every window
// is priced as one document, as plain causal attention.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/recipe/recipe.h"

namespace ustrain {

struct PlannedDocuments {
  std::int64_t tokens = 0;  // documents of this many tokens; 0: one document per sequence
  std::string source;       // how it was chosen, for the plan's report; empty without the mask
};

// `given`: the user's mean document length in tokens, 0 when not given. UserError for a given
// length below 1 or a mask on a dataset the manifest of which cannot be read.
PlannedDocuments planned_documents(const Recipe& recipe, std::int64_t given);

// The document ids of `sequences` sequences of `seq_len` tokens cut into documents of
// `document_tokens` tokens (0: one document each), each sequence numbered from 0: what a
// recorded step reads in TokenBatch::documents.
std::vector<std::int32_t> regular_documents(std::int64_t sequences, std::int64_t seq_len,
                                            std::int64_t document_tokens);

}  // namespace ustrain
