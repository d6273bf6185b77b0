#include "core/recipe/recipe_defaults.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <optional>

#include "core/train/training_data.h"
#include "data/dataset.h"
#include "kernels/error.h"

namespace ustrain {
namespace {

// The recipe's rules again, saying which values came from elsewhere: a rule that fails now
// fails because of them.
void check_filled(const Recipe& r, const std::vector<std::string>& filled) {
  try {
    check_recipe(r);
  } catch (const UserError& e) {
    if (filled.empty()) throw;
    throw UserError(fmt::format("{} (values the recipe leaves unset: {})", e.what(), fmt::join(filled, ", ")));
  }
}

// tp * pp * cp (ep borrows from dp * cp), or nullopt past `limit` (so that no product overflows).
std::optional<std::int64_t> other_dimensions(const ParallelSection& p, std::int64_t limit) {
  std::int64_t product = 1;
  for (const std::int64_t d : {p.tp, p.pp, p.cp}) {
    if (d > limit / product) return std::nullopt;
    product *= d;
  }
  return product;
}

std::int64_t data_parallel_size(const ParallelSection& p, const ProcessInfo& launch) {
  const std::int64_t world = launch.world_size;
  const std::optional<std::int64_t> others = other_dimensions(p, world);
  const std::string dims = fmt::format("tp * pp * cp = {} * {} * {}", p.tp, p.pp, p.cp);
  if (!others || world % *others != 0) {
    const std::string launched = launch.launcher == "none"
                                     ? std::string("ustrain runs as one process without a launcher")
                                     : fmt::format("{} started {} processes", launch.launcher, world);
    // The product, for the message, unless the dimensions are absurd enough to overflow it.
    const std::optional<std::int64_t> product =
        other_dimensions(p, std::numeric_limits<std::int64_t>::max());
    const std::string multiple = product ? fmt::format("a multiple of {}", *product) : "a multiple of that product";
    if (launch.launcher == "none")
      throw UserError(fmt::format("parallel.dp is unset, so it is the processes launched divided by {}, but {}; "
                                  "start it with mpirun -n N or srun --mpi=pmix -n N, N {}, or set parallel.dp",
                                  dims, launched, multiple));
    if (!others)  // the product alone exceeds the processes launched
      throw UserError(fmt::format("parallel.dp is unset, so it is the processes launched divided by {}, but {}, "
                                  "fewer than that product; lower parallel.tp, parallel.pp or parallel.cp, or launch "
                                  "{} processes",
                                  dims, launched, multiple));
    throw UserError(fmt::format("parallel.dp is unset, so it is the processes launched divided by {} = {}, but {}, "
                                "not a multiple of that; launch a multiple, or set parallel.dp",
                                dims, *others, launched));
  }
  return world / *others;
}

}  // namespace

void check_dataset_tokenizers(const Recipe& r, const std::vector<DatasetTokenizer>& datasets) {
  USTRAIN_ASSERT(!datasets.empty(), "a recipe names at least one dataset");
  const DatasetTokenizer& first = datasets.front();
  for (const DatasetTokenizer& d : datasets) {
    if (!(d.tokenizer == first.tokenizer))
      throw UserError(fmt::format("datasets {} and {} were tokenized differently ({} vs {}); blended datasets must "
                                  "share one tokenizer: re-tokenize one with `ustrain data convert --format shards "
                                  "--tokenizer ...`",
                                  first.path, d.path, first.tokenizer.describe(), d.tokenizer.describe()));
  }
  const TokenizerIdentity& t = first.tokenizer;
  if (r.train.document_mask && t.eos_id < 0)
    throw UserError(fmt::format("train.document_mask = true needs the end-of-document token that ends each document, "
                                "but dataset {} knows none ({}); convert it again naming one (`ustrain data convert "
                                "--eos-id ID` or `--eos-token TOKEN`), or set train.document_mask = false",
                                first.path, t.describe()));
  if (r.data.tokenizer != "auto" && t.kind != r.data.tokenizer)
    throw UserError(fmt::format("dataset {} was tokenized with {}, but the recipe says data.tokenizer = \"{}\"; "
                                "set data.tokenizer = \"{}\" (or leave it out: it defaults to the dataset's) or "
                                "convert the data again",
                                first.path, t.describe(), r.data.tokenizer, t.kind));
  if (r.model.vocab_size != 0 && t.vocab_size > r.model.vocab_size)
    throw UserError(fmt::format("dataset {} has a vocabulary of {} tokens but model.vocab_size = {}; set "
                                "model.vocab_size to at least {} (or leave it out: it defaults to the dataset's)",
                                first.path, t.vocab_size, r.model.vocab_size, t.vocab_size));
}

void check_training_tokens(const Recipe& r, const std::string& path, std::int64_t tokens) {
  if (tokens <= r.train.seq_len)
    throw UserError(fmt::format("dataset {} has {} training tokens, fewer than one sequence of {} + 1; use more "
                                "data or a shorter train.seq_len",
                                path, tokens, r.train.seq_len));
}

void check_validation_tokens(const Recipe& r, const std::string& path, bool has_sequence) {
  if (r.train.eval_interval > 0 && !has_sequence)
    throw UserError(fmt::format("dataset {} has no validation split long enough for one sequence of {} tokens; "
                                "convert with a larger --val-fraction or set train.eval_interval = 0",
                                path, r.train.seq_len));
}

Recipe with_dataset_defaults(const Recipe& given, DatasetFacts* facts) {
  Recipe r = given;
  std::vector<DatasetTokenizer> tokenizers;
  DatasetFacts found;
  bool has_validation = false;
  std::string first_path;
  for (const BlendEntry& entry : recipe_datasets(r.data)) {
    const TokenDataset dataset = TokenDataset::open(entry.path);
    tokenizers.push_back({entry.path, dataset.tokenizer()});
    check_training_tokens(r, entry.path, dataset.tokens(Split::train));
    has_validation = has_validation || dataset.tokens(Split::val) > r.train.seq_len;
    found.train_tokens += dataset.tokens(Split::train);
    found.validation_tokens += dataset.tokens(Split::val);
    ++found.datasets;
    if (first_path.empty()) first_path = entry.path;
  }
  check_dataset_tokenizers(r, tokenizers);  // unset keys are not compared
  found.tokenizer = tokenizers.front().tokenizer;
  std::vector<std::string> filled;
  if (r.data.tokenizer == "auto") {
    r.data.tokenizer = found.tokenizer.kind;
    filled.push_back(fmt::format("data.tokenizer = \"{}\" from the dataset", r.data.tokenizer));
  }
  if (r.model.vocab_size == 0) {
    r.model.vocab_size = found.tokenizer.vocab_size;
    filled.push_back(fmt::format("model.vocab_size = {} from the dataset", r.model.vocab_size));
  }
  check_filled(r, filled);
  check_validation_tokens(r, first_path, has_validation);
  if (facts != nullptr) *facts = found;
  return r;
}

Recipe with_launch_defaults(const Recipe& given, const ProcessInfo& launch) {
  Recipe r = given;
  std::vector<std::string> filled;
  if (r.parallel.dp == 0) {
    r.parallel.dp = data_parallel_size(r.parallel, launch);
    filled.push_back(fmt::format("parallel.dp = {} from the {} processes launched", r.parallel.dp, launch.world_size));
  }
  check_filled(r, filled);
  return r;
}

Recipe resolve_recipe(const Recipe& recipe, const ProcessInfo& launch) {
  return with_launch_defaults(with_dataset_defaults(recipe), launch);
}

ProcessInfo dry_run_launch(const Recipe& r, const ProcessInfo& launch) {
  if (launch.launcher != "none") return launch;
  constexpr std::int64_t limit = std::numeric_limits<int>::max();
  const std::int64_t others = other_dimensions(r.parallel, limit).value_or(1);
  const std::int64_t dp = std::max<std::int64_t>(r.parallel.dp, 1);  // unset: the smallest launch
  ProcessInfo planned = launch;
  planned.world_size = planned.local_world_size = static_cast<int>(dp <= limit / others ? dp * others : others);
  return planned;
}

std::vector<std::string> filled_defaults(const Recipe& given, const Recipe& resolved) {
  std::vector<std::string> lines;
  if (given.data.tokenizer != resolved.data.tokenizer)
    lines.push_back(fmt::format("data.tokenizer = \"{}\": the dataset's (the recipe leaves it unset)",
                                resolved.data.tokenizer));
  if (given.model.vocab_size != resolved.model.vocab_size)
    lines.push_back(fmt::format("model.vocab_size = {}: the dataset's vocabulary (the recipe leaves it unset)",
                                resolved.model.vocab_size));
  if (given.parallel.dp != resolved.parallel.dp) {
    const ParallelSection& p = resolved.parallel;
    const std::int64_t others = p.tp * p.pp * p.cp;
    const std::int64_t world = p.dp * others;
    lines.push_back(fmt::format("parallel.dp = {}: {} process{} launched, divided by tp * pp * cp = {} (the recipe "
                                "leaves it unset)",
                                p.dp, world, world == 1 ? "" : "es", others));
  }
  return lines;
}

}  // namespace ustrain
