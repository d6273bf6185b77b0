// Sampling text from a checkpoint's weights (`ustrain generate`).
#pragma once

#include <cstdint>
#include <functional>
#include <string>

namespace ustrain {

struct GenerateOptions {
  // Where the weights come from, one of: a checkpoint directory, or a run directory written
  // by `ustrain train` (its newest checkpoint). The model's shape comes from the recipe saved
  // in the checkpoint.
  std::string checkpoint;
  std::string run_dir;
  std::string prompt;
  std::int64_t tokens = 200;   // new tokens to sample at most
  double temperature = 0.8;    // 0 = greedy
  std::int64_t top_k = 40;     // 0 = whole vocabulary
  std::uint64_t seed = 1;
  bool stop_at_eos = true;
};

// Samples a continuation of the prompt; `on_text` receives each decoded piece as it is made.
// Returns the continuation (without the prompt).
std::string generate_text(const GenerateOptions& options, const std::function<void(const std::string&)>& on_text = {});

}  // namespace ustrain
