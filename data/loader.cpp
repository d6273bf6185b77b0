#include "data/loader.h"

#include <algorithm>

#include <fmt/format.h>

#include "data/document_ids.h"
#include "data/portable_random.h"
#include "kernels/error.h"

namespace ustrain {
namespace {

std::vector<double> weights_of(const std::vector<LoaderSource>& sources) {
  std::vector<double> weights;
  for (const LoaderSource& source : sources) weights.push_back(source.weight);
  return weights;
}

}  // namespace

Loader::Loader(std::vector<LoaderSource> sources, LoaderOptions options)
    : sources_(std::move(sources)), options_(options), blend_(weights_of(sources_)) {
  USTRAIN_ASSERT(options_.seq_len > 0, "seq_len must be positive");
  for (const TokenRun& run : options_.runs)
    USTRAIN_ASSERT(run.begin >= 0 && run.count >= 0 && run.begin + run.count <= options_.seq_len,
                   "a run of a window lies outside the window");
  USTRAIN_ASSERT(options_.num_readers > 0 && options_.reader >= 0 && options_.reader < options_.num_readers,
                 "reader out of range");
  for (std::size_t d = 0; d < sources_.size(); ++d) {
    USTRAIN_ASSERT(sources_[d].tokens != nullptr, "Loader source without tokens");
    const std::int64_t stream = sources_[d].tokens->size();
    if (stream < options_.seq_len + 1)
      throw UserError(fmt::format("{}the token stream has {} tokens, fewer than one sample of seq_len + 1 = {}: "
                                  "use a shorter seq_len or more data",
                                  sources_[d].name.empty() ? "" : sources_[d].name + ": ", stream,
                                  options_.seq_len + 1));
    windows_.push_back(static_cast<std::uint64_t>((stream - 1) / options_.seq_len));
    source_seeds_.push_back(SplitMix64::derive(options_.seed, d));
  }
}

Loader::Origin Loader::origin(std::uint64_t sample) const {
  const std::uint64_t position =
      static_cast<std::uint64_t>(options_.reader) + sample * static_cast<std::uint64_t>(options_.num_readers);
  const BlendSchedule::Pick pick = blend_.pick(position);
  const std::uint64_t windows = windows_[pick.source];
  Origin origin{pick.source, pick.index / windows, pick.index % windows};
  if (options_.shuffle)
    origin.window = IndexPermutation(windows, SplitMix64::derive(source_seeds_[pick.source], origin.epoch))(origin.window);
  return origin;
}

std::int64_t LoaderOptions::sample_tokens() const {
  if (runs.empty()) return seq_len;
  std::int64_t n = 0;
  for (const TokenRun& r : runs) n += r.count;
  return n;
}

void Loader::read_sample(std::uint64_t sample, std::int32_t* inputs, std::int32_t* targets,
                         std::int32_t* documents) const {
  USTRAIN_ASSERT(documents != nullptr || !options_.documents(), "a loader of document ids needs room for them");
  const Origin at = origin(sample);
  const std::int64_t seq = options_.seq_len;
  const TokenSource& tokens = *sources_[at.source].tokens;
  const auto start = static_cast<std::int64_t>(at.window) * seq;
  const std::span<std::int32_t> window_documents(documents, options_.documents() ? static_cast<std::size_t>(seq) : 0);
  if (options_.runs.empty()) {
    // Targets are the inputs moved by one: read S tokens, then only the one after them.
    tokens.read(start, seq, inputs);
    std::copy(inputs + 1, inputs + seq, targets);
    tokens.read(start + seq, 1, targets + seq - 1);
    if (options_.documents())
      number_documents({inputs, window_documents.size()}, options_.document_end, window_documents);
    return;
  }
  if (options_.documents()) {  // the whole window's inputs, which the runs hold only parts of
    std::vector<std::int32_t> window(window_documents.size());
    tokens.read(start, seq, window.data());
    number_documents(window, options_.document_end, window_documents);
  }
  for (const TokenRun& run : options_.runs) {
    tokens.read(start + run.begin, run.count, inputs);
    tokens.read(start + run.begin + 1, run.count, targets);
    inputs += run.count;
    targets += run.count;
  }
}

std::vector<LoaderSource> memory_source(std::shared_ptr<const std::vector<std::int32_t>> tokens) {
  return {LoaderSource{std::make_shared<MemoryTokens>(std::move(tokens)), 1.0, ""}};
}

}  // namespace ustrain
