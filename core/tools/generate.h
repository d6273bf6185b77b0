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

struct GeneratedText {
  std::string text;                // the continuation, without the prompt
  std::int64_t context = 0;        // the model's model.max_seq_len
  // New tokens sampled once the prompt and the text had passed `context` tokens: each saw only
  // the last `context` tokens before it.
  std::int64_t past_context = 0;
};

// Samples a continuation of the prompt; `on_text` receives each decoded piece as it is made.
GeneratedText generate_text(const GenerateOptions& options,
                            const std::function<void(const std::string&)>& on_text = {});

}  // namespace ustrain
