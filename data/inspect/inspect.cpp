#include "data/inspect/inspect.h"

#include <algorithm>
#include <numeric>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "data/shards/dataset.h"
#include "data/shards/dataset_tokenizer.h"
#include "data/shards/mapped_shard.h"
#include "data/files/portable_random.h"
#include "data/inspect/token_stats.h"
#include "kernels/error.h"

namespace ustrain {
namespace {

std::string megabytes(std::uint64_t bytes) { return fmt::format("{:.1f} MB", static_cast<double>(bytes) / 1e6); }

std::uint64_t bytes_on_disk(const TokenDataset& dataset, Split split) {
  std::uint64_t total = 0;
  for (const ShardInfo& shard : dataset.shards(split)) total += shard.bytes;
  return total;
}

void append_totals(std::string& out, const TokenDataset& dataset) {
  out += fmt::format("{:<6} {:>7} {:>12} {:>15} {:>12} {:>12}\n", "split", "shards", "documents", "tokens",
                     "on disk", "tokens/doc");
  for (Split split : {Split::train, Split::val}) {
    const std::int64_t documents = dataset.documents(split), tokens = dataset.tokens(split);
    out += fmt::format("{:<6} {:>7} {:>12} {:>15} {:>12} {:>12}\n", split_name(split), dataset.shards(split).size(),
                       documents, tokens, megabytes(bytes_on_disk(dataset, split)),
                       documents > 0 ? fmt::format("{:.1f}", static_cast<double>(tokens) / static_cast<double>(documents)) : "-");
  }
}

void append_shard_table(std::string& out, const TokenDataset& dataset, const InspectOptions& options) {
  out += fmt::format("\nshards{}:\n  {:<18} {:>12} {:>10} {:>12}  {}\n", options.verify ? " (checksums verified)" : "",
                     "file", "tokens", "documents", "bytes", "checksum");
  for (Split split : {Split::train, Split::val}) {
    const auto& shards = dataset.shards(split);
    const std::size_t shown = options.max_shards > 0 ? std::min<std::size_t>(shards.size(), options.max_shards) : shards.size();
    for (std::size_t i = 0; i < shown; ++i)
      out += fmt::format("  {:<18} {:>12} {:>10} {:>12}  {}\n", shards[i].file, shards[i].tokens, shards[i].documents,
                         shards[i].bytes, shards[i].checksum);
    if (shown < shards.size()) out += fmt::format("  ... and {} more {} shards\n", shards.size() - shown, split_name(split));
  }
}

void append_frequencies(std::string& out, const TokenCounts& counts, const TokenDataset& dataset,
                        const Tokenizer* tokenizer, int top) {
  const auto distinct = std::count_if(counts.counts.begin(), counts.counts.end(), [](std::uint64_t c) { return c > 0; });
  out += fmt::format("\ntoken frequencies (train, {}):\n", counts.sampled ? fmt::format("an even sample of {} tokens", counts.total)
                                                                        : fmt::format("all {} tokens", counts.total));
  out += fmt::format("  distinct ids {} of {}, entropy {:.2f} bits/token", distinct, dataset.vocab_size(), entropy_bits(counts));
  if (dataset.eos_id() >= 0 && counts.total > 0)
    out += fmt::format(", EOS {:.2f}%", 100.0 * static_cast<double>(counts.counts[static_cast<std::size_t>(dataset.eos_id())]) /
                                            static_cast<double>(counts.total));
  std::vector<std::size_t> order(counts.counts.size());
  std::iota(order.begin(), order.end(), 0);
  const std::size_t shown = std::min<std::size_t>(static_cast<std::size_t>(std::max(top, 0)), order.size());
  std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(shown), order.end(),
                    [&](std::size_t a, std::size_t b) { return counts.counts[a] > counts.counts[b] || (counts.counts[a] == counts.counts[b] && a < b); });
  out += fmt::format("\n  {:>4} {:>8} {:>8}  {}\n", "rank", "id", "share", "piece");
  for (std::size_t r = 0; r < shown && counts.counts[order[r]] > 0; ++r) {
    const auto id = static_cast<std::int32_t>(order[r]);
    out += fmt::format("  {:>4} {:>8} {:>7.2f}%  {}\n", r + 1, id,
                       100.0 * static_cast<double>(counts.counts[order[r]]) / static_cast<double>(counts.total),
                       tokenizer ? tokenizer->piece(id) : "");
  }
}

// A window as text, each EOS shown as "<eos>"; ids when the tokenizer is not available.
std::string render_window(const std::vector<std::int32_t>& ids, const Tokenizer* tokenizer, std::int32_t eos) {
  if (!tokenizer) return fmt::format("{}", fmt::join(ids, " "));
  std::string text;
  std::size_t begin = 0;
  for (std::size_t i = 0; i <= ids.size(); ++i) {
    if (i < ids.size() && ids[i] != eos) continue;
    text += tokenizer->decode(std::span<const std::int32_t>(ids).subspan(begin, i - begin));
    if (i < ids.size()) text += "<eos>";
    begin = i + 1;
  }
  return text;
}

void append_samples(std::string& out, const ShardedTokens& tokens, const Tokenizer* tokenizer, std::int32_t eos,
                    const InspectOptions& options) {
  const std::int64_t length = std::min(options.sample_tokens, tokens.size());
  if (options.samples <= 0 || length <= 0) return;
  out += fmt::format("\nsample windows (train, {} tokens each{}):\n", length, tokenizer ? "" : ", as ids: the tokenizer is external");
  SplitMix64 rng(options.seed);
  std::vector<std::int32_t> ids(static_cast<std::size_t>(length));
  for (int s = 0; s < options.samples; ++s) {
    const auto first = static_cast<std::int64_t>(rng.below(static_cast<std::uint64_t>(tokens.size() - length + 1)));
    tokens.read(first, length, ids.data());
    const auto [shard, within] = tokens.locate(first);
    std::string text = render_window(ids, tokenizer, eos);
    std::string indented;
    for (char c : text) indented += c == '\n' ? std::string("\n    ") : std::string(1, c);
    while (indented.ends_with(' ') || indented.ends_with('\n')) indented.pop_back();
    out += fmt::format("  #{} at token {} ({} token {}):\n    {}\n", s + 1, first, tokens.shards()[shard]->path(), within,
                       indented);
  }
}

}  // namespace

std::string inspect_dataset(const InspectOptions& options) {
  const TokenDataset dataset = TokenDataset::open(options.dir);
  if (options.verify) {
    dataset.verify_checksums(Split::train, 2);
    dataset.verify_checksums(Split::val, 2);
  }
  std::unique_ptr<Tokenizer> tokenizer;
  if (dataset.tokenizer().kind != "external") tokenizer = open_dataset_tokenizer(options.dir);
  std::string out = fmt::format("dataset {}\n  format 1.{}, compression {}\n  tokenizer {}\n  source: {}\n\n", options.dir,
                                dataset.format_minor(), dataset.compression(), dataset.tokenizer().describe(),
                                dataset.source());
  append_totals(out, dataset);
  append_shard_table(out, dataset, options);
  const auto train = dataset.open_tokens(Split::train);
  append_frequencies(out, count_tokens(*train, dataset.vocab_size(), options.count_tokens), dataset, tokenizer.get(),
                     options.top);
  append_samples(out, *train, tokenizer.get(), dataset.eos_id(), options);
  return out;
}

}  // namespace ustrain
