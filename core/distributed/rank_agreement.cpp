#include "core/distributed/rank_agreement.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <functional>
#include <map>

#include "core/model/rng.h"

namespace ustrain {
namespace {

// Facts travel as 64-bit hashes, two u32 words each; values are shown cut to this many bytes.
constexpr std::size_t kShownBytes = 120;

std::uint64_t hash_fact(const RankFact& f) { return mix64(hash_string(f.name) ^ mix64(hash_string(f.value))); }

void push_u64(std::vector<std::uint32_t>& words, std::uint64_t v) {
  words.push_back(static_cast<std::uint32_t>(v));
  words.push_back(static_cast<std::uint32_t>(v >> 32));
}

std::uint64_t u64_at(const std::vector<std::uint32_t>& words, std::size_t i) {
  return static_cast<std::uint64_t>(words[2 * i]) | static_cast<std::uint64_t>(words[2 * i + 1]) << 32;
}

// Every rank's value of one fact, cut to kShownBytes.
std::vector<std::string> gather_values(Communicator& world, const std::string& value) {
  std::vector<std::uint32_t> words(kShownBytes / 4, 0);
  std::memcpy(words.data(), value.data(), std::min(value.size(), kShownBytes));
  const std::vector<std::uint32_t> all = gather_words(world, words);
  std::vector<std::string> values;
  for (int r = 0; r < world.size(); ++r) {
    const char* begin = reinterpret_cast<const char*>(all.data() + static_cast<std::size_t>(r) * words.size());
    std::string v(begin, strnlen(begin, kShownBytes));
    if (v.size() == kShownBytes) v += "...";
    values.push_back(std::move(v));
  }
  return values;
}

// "rank 0: 1234; ranks 1,3: 99"
std::string describe_values(const std::vector<std::string>& values) {
  std::map<std::string, std::vector<int>> ranks_of;
  std::vector<std::string> order;
  for (int r = 0; r < static_cast<int>(values.size()); ++r) {
    auto& ranks = ranks_of[values[static_cast<std::size_t>(r)]];
    if (ranks.empty()) order.push_back(values[static_cast<std::size_t>(r)]);
    ranks.push_back(r);
  }
  std::vector<std::string> parts;
  for (const std::string& v : order) {
    const std::vector<int>& ranks = ranks_of[v];
    parts.push_back(fmt::format("{} {}: {}", ranks.size() == 1 ? "rank" : "ranks", fmt::join(ranks, ","),
                                v.empty() ? "(none)" : v));
  }
  return fmt::format("{}", fmt::join(parts, "; "));
}

}  // namespace

std::vector<std::uint32_t> gather_words(Communicator& world, const std::vector<std::uint32_t>& words) {
  std::vector<std::uint32_t> all(words.size() * static_cast<std::size_t>(world.size()));
  std::vector<std::uint32_t> mine = words;
  const auto n = static_cast<std::int64_t>(words.size());
  world.all_gather(Tensor(all.data(), Shape{n * world.size()}, DType::u32), Tensor(mine.data(), Shape{n}, DType::u32))
      .wait();
  return all;
}

std::vector<RankFact> start_facts(const Recipe& recipe, const std::string& version, const std::string& resume_from,
                                  const std::string& command) {
  std::vector<RankFact> facts{{"ustrain version", version}, {"the command", command}};
  for (const auto& [key, value] : recipe_values(recipe))
    if (key != "device.threads" && key != "data.prefetch" && key != "log.level") facts.push_back({key, value});
  facts.push_back({"the checkpoint to resume from", resume_from});
  return facts;
}

void check_ranks_agree(Communicator& world, const std::vector<RankFact>& facts) {
  if (world.size() == 1) return;
  // First the list of names: builds with other recipe keys cannot compare values key by key.
  std::uint64_t names = facts.size();
  for (const RankFact& f : facts) names = mix64(names ^ hash_string(f.name));
  std::vector<std::uint32_t> header;
  push_u64(header, names);
  const std::vector<std::uint32_t> headers = gather_words(world, header);
  bool same_names = true;
  for (int r = 1; r < world.size(); ++r)
    same_names = same_names && u64_at(headers, static_cast<std::size_t>(r)) == u64_at(headers, 0);
  if (!same_names) {
    // Other lists of facts: another build, or another command whose facts differ; every list
    // starts with the version and the command, so those two can be compared by value.
    const std::vector<std::string> versions = gather_values(world, facts.front().value);
    const std::vector<std::string> commands = gather_values(world, facts.size() > 1 ? facts[1].value : "");
    if (std::adjacent_find(versions.begin(), versions.end(), std::not_equal_to<>()) == versions.end())
      throw UserError(fmt::format("the ranks of this job run different commands ({}); start every rank with the same "
                                  "ustrain command and options",
                                  describe_values(commands)));
    throw UserError(fmt::format("the ranks of this job run different ustrain builds ({}); launch the same binary "
                                "on every rank",
                                describe_values(versions)));
  }

  std::vector<std::uint32_t> hashes;
  for (const RankFact& f : facts) push_u64(hashes, hash_fact(f));
  const std::vector<std::uint32_t> all = gather_words(world, hashes);
  for (std::size_t k = 0; k < facts.size(); ++k)
    for (int r = 1; r < world.size(); ++r)
      if (u64_at(all, static_cast<std::size_t>(r) * facts.size() + k) != u64_at(all, k))
        throw UserError(fmt::format(
            "the ranks of this job disagree on {} ({}); every rank must run the same recipe, --set options, "
            "binary and --resume; this is the first difference found",
            facts[k].name, describe_values(gather_values(world, facts[k].value))));
}

}  // namespace ustrain
