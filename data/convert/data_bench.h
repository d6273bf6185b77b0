// `ustrain data bench`: conversion throughput (MB/s of text) for the byte and sentencepiece
// tokenizers with 1..N workers, and for tokenizer files the user names (tokenizer.json,
// .tiktoken, .model) their encoding speed on one thread too, and loader throughput (tokens/s) from the page cache, on a
// synthetic English-like corpus written into a scratch directory.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace ustrain {

struct DataBenchOptions {
  std::string dir;                   // scratch directory to create (must not exist)
  std::int64_t text_mb = 32;         // corpus for the byte tokenizer and the loader
  std::int64_t sp_text_mb = 8;       // corpus for sentencepiece (it encodes much more slowly)
  std::int64_t sp_vocab = 8000;
  int max_workers = 2;
  std::int64_t seq_len = 1024;
  std::int64_t batch = 8;
  double loader_seconds = 2;
  double step_ms = 2;                // simulated compute per batch when measuring waiting
  bool keep = false;                 // keep the scratch directory
  std::vector<std::string> tokenizers;  // tokenizer files to measure as well
};

// Runs the benchmark; each result line goes to `report` as it is measured.
void run_data_bench(const DataBenchOptions& options, const std::function<void(const std::string&)>& report);

}  // namespace ustrain
