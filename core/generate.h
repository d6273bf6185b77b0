// Sampling text from a finished run's weights (`ustrain generate`).
#pragma once

#include <cstdint>
#include <functional>
#include <string>

namespace ustrain {

struct GenerateOptions {
  std::string run_dir;         // holds recipe.toml and model.h5 written by `ustrain train`
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
