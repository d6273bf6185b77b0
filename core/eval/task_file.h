// Multiple-choice tasks for downstream evaluation (`ustrain eval --task`, the recipe's [eval]
// section): a JSONL file, one item a line,
//
//   {"context": "The cat sat on the", "choices": [" mat", " moon"], "answer": 0}
//
// The context and each choice are tokenized on their own, as `ustrain data convert` tokenizes a
// document's text, with nothing added (no BOS or EOS).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "data/tokenizers/tokenizer.h"

namespace ustrain {

struct TaskItem {
  std::vector<std::int32_t> context;
  std::vector<std::vector<std::int32_t>> choices;
  std::vector<std::int64_t> choice_bytes;  // each choice's text in UTF-8 bytes (acc_norm)
  std::int64_t answer = 0;                 // index into choices
};

struct ScoringTask {
  std::string name;  // the file name without directories and extension
  std::string path;
  std::vector<TaskItem> items;
  // Items with a context + choice longer than a row of the model's sequence length holds:
  // their context is cut from the left (keeping its end), as lm-evaluation-harness does.
  std::int64_t truncated = 0;
};

// Reads and tokenizes a task file for a model of `seq_len` tokens per sequence. UserError naming
// the file, the line and what is wrong: not JSON, not an object, a missing or mistyped key, no
// choices, an empty choice or context, an answer out of range, a choice too long for any context.
ScoringTask load_task(const std::string& path, const Tokenizer& tokenizer, std::int64_t seq_len);

}  // namespace ustrain
