#include "core/train/training_data.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <thread>

#include "core/recipe/recipe_defaults.h"
#include "data/dataset.h"
#include "data/json_input.h"
#include "data/mapped_shard.h"
#include "data/token_stats.h"
#include "kernels/error.h"

namespace ustrain {
namespace {

using nlohmann::json;

constexpr std::int64_t kUnigramSampleTokens = std::int64_t{1} << 23;
constexpr int kStateVersion = 1;

struct Source {
  std::string path;
  double weight = 1;
  TokenDataset dataset;
};

std::vector<Source> open_sources(const Recipe& r) {
  std::vector<Source> sources;
  for (const BlendEntry& entry : recipe_datasets(r.data))
    sources.push_back({entry.path, entry.weight, TokenDataset::open(entry.path)});
  return sources;
}

void check_tokenizers(const Recipe& r, const std::vector<Source>& sources) {
  USTRAIN_ASSERT(r.resolved(), "the recipe's dataset defaults were not filled in");
  std::vector<DatasetTokenizer> tokenizers;
  for (const Source& source : sources) tokenizers.push_back({source.path, source.dataset.tokenizer()});
  check_dataset_tokenizers(r, tokenizers);
}

int verify_threads() { return static_cast<int>(std::clamp(std::thread::hardware_concurrency(), 1u, 8u)); }

// Loader sources of one split: those with at least one window; `required` makes a missing
// one an error (the train split), else it is left out (a blended dataset without val data).
std::vector<LoaderSource> loader_sources(const Recipe& r, const std::vector<Source>& sources, Split split) {
  std::vector<LoaderSource> result;
  for (const Source& source : sources) {
    const std::int64_t tokens = source.dataset.tokens(split);
    if (split == Split::train) check_training_tokens(r, source.path, tokens);
    if (tokens <= r.train.seq_len) continue;
    if (r.data.verify == "checksums") source.dataset.verify_checksums(split, verify_threads());
    result.push_back({source.dataset.open_tokens(split), source.weight, source.path});
  }
  return result;
}

// Unigram cross-entropy of the validation sources under the blended training distribution:
// p(t) = sum_d w_d (c_d(t) + 1) / (N_d + V).
double unigram_cross_entropy(const Loader& train, const Loader& val, std::int64_t vocab) {
  std::vector<double> p(static_cast<std::size_t>(vocab), 0.0);
  const auto normalised = [](const Loader& loader, std::size_t d) {
    return static_cast<double>(loader.blend().quota(d)) / static_cast<double>(loader.blend().period());
  };
  for (std::size_t d = 0; d < train.sources(); ++d) {
    const TokenCounts counts = count_tokens(*train.source(d).tokens, vocab, kUnigramSampleTokens);
    const double denominator = static_cast<double>(counts.total) + static_cast<double>(vocab);
    for (std::size_t t = 0; t < p.size(); ++t)
      p[t] += normalised(train, d) * (static_cast<double>(counts.counts[t]) + 1.0) / denominator;
  }
  double loss = 0;
  for (std::size_t d = 0; d < val.sources(); ++d) {
    const TokenCounts counts = count_tokens(*val.source(d).tokens, vocab, kUnigramSampleTokens);
    double nll = 0;
    for (std::size_t t = 0; t < p.size(); ++t) nll -= static_cast<double>(counts.counts[t]) * std::log(p[t]);
    loss += normalised(val, d) * nll / static_cast<double>(counts.total);
  }
  return loss;
}

// The runs of every window a context-parallel rank takes (none: the whole window).
std::vector<TokenRun> context_runs(const ContextSplit& context, std::int64_t seq_len) {
  if (context.size == 1) return {};
  std::vector<TokenRun> runs;
  for (const SeqRange& r : context.runs(seq_len)) runs.push_back({r.begin, r.count});
  return runs;
}

}  // namespace

std::vector<BlendEntry> recipe_datasets(const DataSection& data) {
  if (!data.blend.empty()) return parse_blend(data.blend);
  return {BlendEntry{data.path, 1.0}};
}

TrainingData::TrainingData(const Recipe& r, int reader, int num_readers, ContextSplit context)
    : seq_len_(r.train.seq_len), seed_(r.run.seed), num_readers_(num_readers) {
  const std::vector<Source> sources = open_sources(r);
  check_tokenizers(r, sources);
  const std::int64_t vocab = sources.front().dataset.vocab_size();

  std::vector<LoaderSource> train = loader_sources(r, sources, Split::train);
  std::vector<LoaderSource> val = loader_sources(r, sources, Split::val);
  check_validation_tokens(r, sources.front().path, !val.empty());
  for (const LoaderSource& source : train) train_tokens_ += source.tokens->size();
  for (const LoaderSource& source : val) validation_tokens_ += source.tokens->size();

  const std::vector<TokenRun> runs = context_runs(context, seq_len_);
  // train.document_mask: each window's document ids (the datasets share the checked EOS).
  const std::int32_t document_end = r.train.document_mask ? sources.front().dataset.eos_id() : -1;
  const LoaderOptions train_options{seq_len_, seed_, /*shuffle=*/true, reader, num_readers, runs, document_end};
  auto train_loader = std::make_shared<const Loader>(std::move(train), train_options);
  json described = json::array();
  for (std::size_t d = 0; d < train_loader->sources(); ++d)
    described.push_back({{"tokens", train_loader->source(d).tokens->size()}, {"quota", train_loader->blend().quota(d)}});
  state_sources_ = described.dump();
  const int depth = static_cast<int>(r.data.prefetch);
  if (!val.empty()) {
    // Validation always reads the same windows from the start of each split, in order.
    const LoaderOptions val_options{seq_len_, seed_, /*shuffle=*/false, reader, num_readers, runs, document_end};
    auto val_loader = std::make_shared<const Loader>(std::move(val), val_options);
    for (std::size_t d = 0; d < val_loader->sources(); ++d)
      validation_windows_ += static_cast<std::int64_t>(val_loader->windows(d));
    unigram_val_loss_ = unigram_cross_entropy(*train_loader, *val_loader, vocab);
    val_ = std::make_unique<BatchPrefetcher>(val_loader, r.train.micro_batch, depth);
  } else {
    unigram_val_loss_ = std::nan("");
  }
  train_ = std::make_unique<BatchPrefetcher>(train_loader, r.train.micro_batch, depth);
}

TokenBatch TrainingData::next_train() { return train_->next(); }

std::string TrainingData::state() const {
  const std::uint64_t position = train_->position() * static_cast<std::uint64_t>(num_readers_);
  return json{{"version", kStateVersion},
              {"position", position},
              {"seq_len", seq_len_},
              {"seed", seed_},
              {"sources", parse_json(state_sources_, "the data-loader position")}}
      .dump();
}

void TrainingData::restore(const std::string& state, std::int64_t tokens_seen) {
  json saved;
  std::uint64_t position = 0;
  try {
    saved = parse_json(state, "the saved data-loader position");
    if (saved.at("version").get<int>() != kStateVersion)
      throw UserError(fmt::format("the saved data-loader position has version {}; this ustrain reads version {}",
                                  saved.at("version").get<int>(), kStateVersion));
    position = saved.at("position").get<std::uint64_t>();
    if (saved.at("seq_len").get<std::int64_t>() != seq_len_ || saved.at("seed").get<std::uint64_t>() != seed_ ||
        saved.at("sources").dump() != state_sources_)
      throw UserError(fmt::format("the saved data-loader position belongs to other data (seq_len {}, seed {}, sources "
                                  "{}; now seq_len {}, seed {}, sources {}): resume with the dataset, blend, "
                                  "train.seq_len and run.seed the checkpoint was made with",
                                  saved.at("seq_len").dump(), saved.at("seed").dump(), saved.at("sources").dump(),
                                  seq_len_, seed_, state_sources_));
  } catch (const json::exception& e) {
    throw UserError(fmt::format("the saved data-loader position is unreadable ({}): the checkpoint is corrupt", e.what()));
  }
  // Every step takes train.global_batch samples of seq_len tokens and counts them in tokens_seen.
  const auto seq = static_cast<std::uint64_t>(seq_len_);
  if (tokens_seen < 0 || position > static_cast<std::uint64_t>(tokens_seen) / seq ||
      position * seq != static_cast<std::uint64_t>(tokens_seen))
    throw UserError(fmt::format("the saved data position {} (samples of {} tokens) does not match the {} tokens the "
                                "checkpoint has seen: the checkpoint was edited or damaged; use an earlier checkpoint",
                                position, seq_len_, tokens_seen));
  if (position % static_cast<std::uint64_t>(num_readers_) != 0)
    throw UserError(fmt::format("the saved data position {} (samples taken by all readers) does not divide among {} "
                                "data-parallel readers: resume with a number of readers that divides it",
                                position, num_readers_));
  train_->seek(position / static_cast<std::uint64_t>(num_readers_));
}

void TrainingData::reset_validation() {
  if (val_) val_->seek(0);
}

TokenBatch TrainingData::next_validation() {
  USTRAIN_ASSERT(val_ != nullptr, "no validation split");
  return val_->next();
}

}  // namespace ustrain
