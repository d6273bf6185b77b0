#include "data/convert/data_bench.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <thread>

#include <fmt/format.h>

#include "data/convert/convert.h"
#include "data/shards/dataset.h"
#include "data/loading/loader.h"
#include "data/shards/mapped_shard.h"
#include "data/files/portable_random.h"
#include "data/loading/prefetcher.h"
#include "data/tokenizers/tokenizer.h"
#include "data/convert/tokenizer_training.h"
#include "kernels/error.h"

namespace ustrain {
namespace fs = std::filesystem;

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

// English-like text: 20000 made-up words of 1-4 syllables drawn with Zipf-like frequencies,
// some common English words, digits and accents; sentences, and paragraphs separated by
// blank lines (one document each).
std::vector<std::string> make_words() {
  static const char* const kSyllables[] = {"ka", "ri", "to", "men", "sa", "lo", "ven", "dor", "thi", "ul", "pra", "ne",
                                           "gos", "mi", "tur", "e", "an", "ba", "sel", "qui", "or", "fa", "lin", "der",
                                           "co", "str", "ing", "tion", "al", "er", "na\xC3\xAF", "caf\xC3\xA9", "42",
                                           "19", "x", "po", "hu", "gra", "ve", "is"};
  constexpr std::uint64_t kCount = sizeof kSyllables / sizeof kSyllables[0];
  std::vector<std::string> words = {"the", "of", "and", "to", "in", "a", "is", "that", "for", "it", "as", "was"};
  for (std::uint64_t k = 0; words.size() < 20000; ++k) {
    std::string word;
    for (std::uint64_t rest = k; ; rest /= kCount) {
      word += kSyllables[rest % kCount];
      if (rest < kCount) break;
    }
    words.push_back(word);
  }
  return words;
}

void write_corpus(const std::string& path, std::int64_t bytes, std::uint64_t seed) {
  const std::vector<std::string> words = make_words();
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> file(std::fopen(path.c_str(), "wb"), &std::fclose);
  if (!file) throw UserError(fmt::format("cannot write {}", path));
  SplitMix64 rng(seed);
  std::string paragraph;
  std::int64_t written = 0;
  while (written < bytes) {
    paragraph.clear();
    const std::uint64_t sentences = 1 + rng.below(8);
    for (std::uint64_t s = 0; s < sentences; ++s) {
      const std::uint64_t length = 4 + rng.below(20);
      for (std::uint64_t w = 0; w < length; ++w) {
        // u^4 skews towards the first (most common) words.
        const double u = rng.unit();
        std::string word = words[static_cast<std::size_t>(u * u * u * u * static_cast<double>(words.size()))];
        if (w == 0) word[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(word[0])));
        paragraph += word;
        paragraph += w + 1 < length ? " " : ". ";
      }
      if (rng.below(4) == 0) paragraph += "\n";
    }
    paragraph += "\n\n";
    std::fwrite(paragraph.data(), 1, paragraph.size(), file.get());
    written += static_cast<std::int64_t>(paragraph.size());
  }
}

double convert_mb_per_s(const std::string& corpus, const std::string& output, const std::string& tokenizer, int workers) {
  ConvertOptions options;
  options.format = "text";  // known, so the time measured is the conversion's alone
  options.inputs = {corpus};
  options.output_dir = output;
  options.tokenizer = tokenizer;
  options.workers = workers;
  options.val_fraction = 0.01;
  const ConvertReport report = convert_dataset(options);
  return static_cast<double>(report.bytes_read) / 1e6 / report.seconds;
}

struct LoaderRate {
  double tokens_per_second = 0;
  double wait_per_batch = 0;  // seconds next() waited, on average
};

// Reads batches for about `seconds`; depth < 0 reads samples directly on this thread. With
// step_seconds > 0 each batch is followed by that much (simulated) training work.
LoaderRate measure_loader(const std::string& dataset_dir, const DataBenchOptions& o, int depth, double step_seconds = 0) {
  const TokenDataset dataset = TokenDataset::open(dataset_dir);
  auto loader = std::make_shared<const Loader>(
      std::vector<LoaderSource>{{dataset.open_tokens(Split::train), 1.0, dataset_dir}},
      LoaderOptions{o.seq_len, 1234, true, 0, 1, {}});
  std::vector<std::int32_t> inputs(static_cast<std::size_t>(o.seq_len)), targets(inputs.size());
  std::uint64_t samples = 0;
  double wait = 0;
  const auto start = Clock::now();
  if (depth < 0) {
      while (seconds_since(start) < o.loader_seconds)
      for (int i = 0; i < 64; ++i) loader->read_sample(samples++, inputs.data(), targets.data());
  } else {
    BatchPrefetcher prefetcher(loader, o.batch, depth);
    while (seconds_since(start) < o.loader_seconds) {
      prefetcher.next();
      samples += static_cast<std::uint64_t>(o.batch);
      if (step_seconds > 0) std::this_thread::sleep_for(std::chrono::duration<double>(step_seconds));
    }
    wait = prefetcher.wait_seconds();
  }
  const double elapsed = seconds_since(start);
  const double batches = static_cast<double>(samples) / static_cast<double>(o.batch);
  return {static_cast<double>(samples) * static_cast<double>(o.seq_len) / elapsed, wait / batches};
}

// Encoding alone on this thread (the text in memory, documents as conversion cuts them), then
// whole conversions with 1..max_workers workers.
void measure_tokenizer_file(const std::string& file, const std::string& corpus, const fs::path& dir, int max_workers,
                            const std::function<void(const std::string&)>& report) {
  const auto loading = Clock::now();
  const std::unique_ptr<Tokenizer> tokenizer = open_tokenizer(file);
  const double load_seconds = seconds_since(loading);
  std::vector<std::string> documents;
  {
    std::ifstream in(corpus, std::ios::binary);
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    for (std::size_t from = 0, at; from < text.size(); from = at + 2) {
      at = text.find("\n\n", from);
      if (at == std::string::npos) at = text.size();
      documents.push_back(text.substr(from, at - from));
    }
  }
  std::size_t bytes = 0, tokens = 0;
  const auto start = Clock::now();
  for (const std::string& document : documents) {
    bytes += document.size();
    tokens += tokenizer->encode(document).size();
  }
  const double seconds = seconds_since(start);
  report(fmt::format("tokenizer {} (loaded in {:.2f} s): encode, 1 thread: {:.1f} MB/s of text, {:.2f} bytes per token",
                     file, load_seconds, static_cast<double>(bytes) / 1e6 / seconds,
                     static_cast<double>(bytes) / static_cast<double>(std::max<std::size_t>(tokens, 1))));
  for (int workers = 1; workers <= max_workers; ++workers)
    report(fmt::format("convert, {}, {} worker{}: {:.1f} MB/s of text", file, workers, workers > 1 ? "s" : "",
                       convert_mb_per_s(corpus, (dir / fmt::format("file-{}", workers)).string(), file, workers)));
  for (int workers = 1; workers <= max_workers; ++workers) fs::remove_all(dir / fmt::format("file-{}", workers));
}

}  // namespace

void run_data_bench(const DataBenchOptions& o, const std::function<void(const std::string&)>& report) {
  if (o.dir.empty()) throw UserError("data bench needs a scratch directory (--dir)");
  if (fs::exists(o.dir)) throw UserError(fmt::format("{} exists already: name a new scratch directory", o.dir));
  fs::create_directories(o.dir);
  struct Cleanup {
    std::string dir;
    bool keep;
    ~Cleanup() {
      std::error_code ignored;
      if (!keep) fs::remove_all(dir, ignored);
    }
  } cleanup{o.dir, o.keep};
  const fs::path dir(o.dir);
  const std::string corpus = (dir / "corpus.txt").string(), sp_corpus = (dir / "corpus-sp.txt").string();
  write_corpus(corpus, o.text_mb << 20, 1);
  write_corpus(sp_corpus, o.sp_text_mb << 20, 2);
  report(fmt::format("synthetic corpus: {} MB (byte tokenizer, loader), {} MB (sentencepiece); {} hardware threads",
                     o.text_mb, o.sp_text_mb, std::thread::hardware_concurrency()));

  for (int workers = 1; workers <= o.max_workers; ++workers)
    report(fmt::format("convert, byte tokenizer, {} worker{}: {:.1f} MB/s of text", workers, workers > 1 ? "s" : "",
                       convert_mb_per_s(corpus, (dir / fmt::format("byte-{}", workers)).string(), "byte", workers)));

  TokenizerTrainOptions train;
  train.format = "text";
  train.inputs = {sp_corpus};
  train.output = (dir / "bench.model").string();
  train.vocab_size = o.sp_vocab;
  train.max_sentences = 200'000;
  train.threads = o.max_workers;
  const TokenizerTrainReport trained = train_tokenizer(train);
  report(fmt::format("tokenizer train, sentencepiece bpe, vocab {}: {:.1f} s on {} lines", o.sp_vocab, trained.seconds,
                     trained.lines_used));
  for (int workers = 1; workers <= o.max_workers; ++workers)
    report(fmt::format("convert, sentencepiece, {} worker{}: {:.1f} MB/s of text", workers, workers > 1 ? "s" : "",
                       convert_mb_per_s(sp_corpus, (dir / fmt::format("sp-{}", workers)).string(), train.output, workers)));

  for (const std::string& file : o.tokenizers) measure_tokenizer_file(file, sp_corpus, dir, o.max_workers, report);

  const std::string byte_dataset = (dir / "byte-1").string();
  const LoaderRate direct = measure_loader(byte_dataset, o, -1);
  report(fmt::format("loader, seq_len {}, samples read directly: {:.1f} M tokens/s", o.seq_len, direct.tokens_per_second / 1e6));
  const LoaderRate prefetched = measure_loader(byte_dataset, o, 4);
  report(fmt::format("loader, seq_len {}, batch {}, prefetch 4: {:.1f} M tokens/s", o.seq_len, o.batch,
                     prefetched.tokens_per_second / 1e6));
  const LoaderRate stepping = measure_loader(byte_dataset, o, 4, o.step_ms / 1e3);
  report(fmt::format("loader, prefetch 4, {} ms of work per batch: next() waited {:.1f} us per batch on average",
                     o.step_ms, stepping.wait_per_batch * 1e6));

  ConvertOptions compressed;
  compressed.format = "text";
  compressed.inputs = {corpus};
  compressed.output_dir = (dir / "byte-deflate").string();
  compressed.compression = 4;
  const ConvertReport made = convert_dataset(compressed);
  report(fmt::format("convert, byte tokenizer, deflate level 4, 1 worker: {:.1f} MB/s of text",
                     static_cast<double>(made.bytes_read) / 1e6 / made.seconds));
  const TokenDataset packed = TokenDataset::open(compressed.output_dir);
  std::uint64_t packed_bytes = 0;
  for (const ShardInfo& shard : packed.shards(Split::train)) packed_bytes += shard.bytes;
  const auto opening = Clock::now();
  const auto decoded = packed.open_tokens(Split::train);
  report(fmt::format("open deflate shards ({:.2f} bytes/token on disk): {:.2f} s to decompress {} M tokens into memory",
                     static_cast<double>(packed_bytes) / static_cast<double>(made.train_tokens), seconds_since(opening),
                     decoded->size() / 1000000));
}

}  // namespace ustrain
