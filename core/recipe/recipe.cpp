// Reading a recipe: TOML text -> typed fields (via the schema) -> overrides -> rules that
// tie keys together -> what this build supports. Every failure is one UserError that
// names where the value came from ("FILE:LINE" or "--set KEY=VALUE") and what to do.
#include "core/recipe/recipe.h"

#include <fmt/format.h>
#include <toml++/toml.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <string_view>
#include <system_error>
#include <tuple>
#include <vector>

#include "core/memory/model_size.h"
#include "core/recipe/recipe_schema.h"
#include "core/trace/step_range.h"
#include "parallel/pipeline_schedule.h"
#include "data/blend.h"
#include "kernels/error.h"

namespace ustrain {
namespace {

// Where each key got its value, so that a rule about several keys can point at a line.
class Origins {
 public:
  explicit Origins(std::string source) : source_(std::move(source)) {}

  void record(std::string_view key, std::string where) {
    where_[std::string(key)] = {++count_, std::move(where)};
  }

  // Where the last set of `keys` got its value (an override, or the later line: the
  // likeliest culprit); the recipe's name when all of them are defaults.
  const std::string& of(std::initializer_list<std::string_view> keys) const {
    const std::pair<int, std::string>* latest = nullptr;
    for (std::string_view key : keys) {
      auto it = where_.find(key);
      if (it != where_.end() && (latest == nullptr || it->second.first > latest->first)) {
        latest = &it->second;
      }
    }
    return latest != nullptr ? latest->second : source_;
  }

 private:
  std::string source_;
  int count_ = 0;
  std::map<std::string, std::pair<int, std::string>, std::less<>> where_;
};

// The most steps log.trace_steps may record.
constexpr std::int64_t kMaxTracedSteps = 20;

// The largest recipe file read.
constexpr std::size_t kMaxRecipeBytes = std::size_t{16} << 20;

template <class... Args>
[[noreturn]] void fail(fmt::format_string<Args...> format, Args&&... args) {
  throw UserError(fmt::format(format, std::forward<Args>(args)...));
}

std::string location(const std::string& source, const toml::source_region& region) {
  if (region.begin.line == 0) return source;
  return fmt::format("{}:{}", source, region.begin.line);
}

std::optional<Scalar> scalar_of(const toml::node& node) {
  if (const auto* v = node.as_integer()) return Scalar{v->get()};
  if (const auto* v = node.as_floating_point()) return Scalar{v->get()};
  if (const auto* v = node.as_boolean()) return Scalar{v->get()};
  if (const auto* v = node.as_string()) return Scalar{v->get()};
  return std::nullopt;
}

// "integer 3", "string \"x\"", "a table": what the user wrote, for type errors.
std::string describe_found(const toml::node& node) {
  if (std::optional<Scalar> scalar = scalar_of(node)) {
    return fmt::format("{} {}", value_type_name(type_of(*scalar)), abbreviate(toml_literal(*scalar)));
  }
  switch (node.type()) {
    case toml::node_type::table: return "a table";
    case toml::node_type::array: return "an array";
    case toml::node_type::date: return "a date";
    case toml::node_type::time: return "a time";
    case toml::node_type::date_time: return "a date-time";
    default: return "an unsupported value";
  }
}

std::string key_list(std::string_view section) {
  std::vector<std::string_view> names;
  for (const KeySpec& k : recipe_keys()) {
    if (k.section() == section) names.push_back(k.name());
  }
  return fmt::format("{}", fmt::join(names, ", "));
}

std::string section_list() {
  std::vector<std::string_view> names;
  for (const SectionSpec& s : recipe_sections()) names.push_back(s.name);
  return fmt::format("{}", fmt::join(names, ", "));
}

[[noreturn]] void fail_unknown_key(const std::string& where, std::string_view dotted) {
  if (std::optional<std::string> near = suggest_key(dotted)) {
    fail("{}: unknown key {}; did you mean {}?", where, dotted, *near);
  }
  const std::string_view section = dotted.substr(0, dotted.find('.'));
  if (find_section(section) != nullptr) {
    fail("{}: unknown key {}; the keys of [{}] are: {}", where, abbreviate(dotted), section, key_list(section));
  }
  fail("{}: unknown key {}; keys are written SECTION.KEY, with sections {}", where, abbreviate(dotted),
       section_list());
}

// Type-checks and range-checks one value, then stores it.
void assign(const KeySpec& spec, const toml::node& node, const std::string& where, Recipe& r) {
  const std::optional<Scalar> given = scalar_of(node);
  const std::optional<Scalar> value = given ? coerce(spec, *given) : std::nullopt;
  if (!value) {
    fail("{}: {}: expected {}, found {}; write it like {} = {}", where, spec.key,
         value_type_name(spec.type), describe_found(node), spec.key,
         toml_literal(read_field(spec, Recipe{})));
  }
  if (std::optional<std::string> problem = violation(spec, *value)) {
    fail("{}: {} = {} is not allowed: it {}", where, spec.key, abbreviate(toml_literal(*value)), *problem);
  }
  write_field(spec, r, *value);
}

void apply_document(const toml::table& root, const std::string& source, Recipe& r,
                    Origins& origins) {
  // toml++ orders keys by name; report problems in the order they appear in the file.
  struct Entry {
    const toml::key* section;
    const toml::key* key;  // null for a top-level entry that is not a known section table
    const toml::node* node;
    const toml::source_position& position() const {
      return (key != nullptr ? key : section)->source().begin;
    }
  };
  std::vector<Entry> entries;
  for (auto&& [section_key, section_node] : root) {
    const toml::table* table = section_node.as_table();
    if (find_section(section_key.str()) == nullptr || table == nullptr) {
      entries.push_back({&section_key, nullptr, &section_node});
      continue;
    }
    for (auto&& [key, node] : *table) entries.push_back({&section_key, &key, &node});
  }
  std::stable_sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    return std::tie(a.position().line, a.position().column) <
           std::tie(b.position().line, b.position().column);
  });

  for (const Entry& e : entries) {
    const std::string_view section = e.section->str();
    if (e.key == nullptr) {
      const std::string where = location(source, e.section->source());
      if (find_section(section) != nullptr) {
        fail("{}: {} must be a section (a table such as [{}]), found {}", where, section, section,
             describe_found(*e.node));
      }
      if (!e.node->is_table()) fail_unknown_key(where, section);
      if (std::optional<std::string> near = suggest_section(section)) {
        fail("{}: unknown section [{}]; did you mean [{}]?", where, section, *near);
      }
      fail("{}: unknown section [{}]; the sections are: {}", where, section, section_list());
    }
    const std::string dotted = fmt::format("{}.{}", section, e.key->str());
    const std::string where = location(source, e.key->source());
    const KeySpec* spec = find_key(dotted);
    if (spec == nullptr) fail_unknown_key(where, dotted);
    assign(*spec, *e.node, where, r);
    origins.record(spec->key, where);
  }
}

std::string_view trim(std::string_view text) {
  const std::size_t begin = text.find_first_not_of(" \t");
  if (begin == std::string_view::npos) return {};
  const std::size_t end = text.find_last_not_of(" \t");
  return text.substr(begin, end - begin + 1);
}

// The override's value as a one-entry TOML document {v = VALUE}. A word that is not TOML
// (full, runs/exp1) is read as a string, so that strings need no shell-quoted quotes.
toml::table parse_override_value(const std::string& where, std::string_view text) {
  if (text.empty()) fail("{}: no value after '='; write KEY=VALUE", where);
  try {
    toml::table doc = toml::parse(fmt::format("v = {}", text), std::string_view("--set"));
    if (doc.size() != 1 || !doc.contains("v")) {
      fail("{}: the value must be a single TOML value", where);
    }
    return doc;
  } catch (const toml::parse_error&) {
    // Not TOML: fall through to the bare-word reading.
  }
  // A quote or bracket shows TOML was meant; a quote inside could end the string early.
  if (text.find_first_of("\"[{") == 0 || text.find('\'') != std::string_view::npos) {
    fail("{}: {} is not a valid TOML value; check its quotes and brackets", where, abbreviate(text));
  }
  try {
    // A TOML literal string takes the word as it is and checks it is valid UTF-8.
    return toml::parse(fmt::format("v = '{}'", text), std::string_view("--set"));
  } catch (const toml::parse_error&) {
    fail("{}: {} is neither a TOML value nor a plain word; write it as a quoted TOML string",
         where, abbreviate(text));
  }
}

void apply_override(const std::string& assignment, Recipe& r, Origins& origins) {
  const std::string where = "--set " + abbreviate(assignment);
  const std::size_t eq = assignment.find('=');
  if (eq == std::string::npos) {
    fail("{}: expected KEY=VALUE, e.g. --set train.steps=200", where);
  }
  const std::string_view dotted = trim(std::string_view(assignment).substr(0, eq));
  const std::string_view text = trim(std::string_view(assignment).substr(eq + 1));
  const KeySpec* spec = find_key(dotted);
  if (spec == nullptr) {
    if (find_section(dotted) != nullptr) {
      fail("{}: [{}] is a section; set one of its keys ({}) as {}.KEY=VALUE", where, dotted,
           key_list(dotted), dotted);
    }
    fail_unknown_key(where, dotted);
  }
  const toml::table doc = parse_override_value(where, text);
  assign(*spec, *doc.get("v"), where, r);
  origins.record(spec->key, where);
}

// What tensor (and sequence) parallelism needs of the model: whole heads, whole GQA groups and
// equal MLP slices on every rank; under sp, token rows that split evenly.
void check_tensor_parallel_rules(const Recipe& r, const Origins& at) {
  const std::int64_t tp = r.parallel.tp;
  if (tp == 1) return;
  const ModelSection& m = r.model;
  const std::pair<std::string_view, std::int64_t> divisible[] = {
      {"model.n_heads", m.n_heads}, {"model.n_kv_heads", m.n_kv_heads}, {"model.ffn_hidden", m.ffn_hidden}};
  for (const auto& [key, value] : divisible)
    if (value % tp != 0)
      fail("{}: {} = {} is not divisible by parallel.tp = {}; tensor parallelism gives every rank the same number "
           "of attention heads, key/value heads and MLP units, so choose a tp that divides {} (or change the model)",
           at.of({key, "parallel.tp"}), key, value, tp, key);
  if (r.parallel.sp && r.train.seq_len % tp != 0)
    fail("{}: train.seq_len = {} is not divisible by parallel.tp = {}; sequence parallelism splits every "
         "micro-batch's tokens evenly over the tensor-parallel ranks, so make seq_len a multiple of tp, or set "
         "parallel.sp = false",
         at.of({"train.seq_len", "parallel.tp", "parallel.sp"}), r.train.seq_len, tp);
}

// What pipeline parallelism needs: stages of whole, equal layer ranges, and a schedule that
// can run the layout (parallel/pipeline_schedule.h).
void check_pipeline_rules(const Recipe& r, const Origins& at) {
  const ParallelSection& p = r.parallel;
  const std::int64_t stages = p.pp * p.virtual_stages;
  if (r.model.n_layers % stages != 0)
    fail("{}: model.n_layers = {} is not divisible by parallel.pp * parallel.virtual_stages = {} * {} = {}; every "
         "pipeline stage holds the same number of layers, so choose pp and virtual_stages whose product divides "
         "n_layers",
         at.of({"model.n_layers", "parallel.pp", "parallel.virtual_stages"}), r.model.n_layers, p.pp,
         p.virtual_stages, stages);
  const PipelineSchedule schedule = parse_pipeline_schedule(p.pp_schedule);
  // With dp unset (0) the micro-batch count waits for the launch (check_recipe asks again);
  // the rules that hold for any count are asked now, with a count (pp) that passes the others.
  const int micro_batches = p.dp == 0 ? static_cast<int>(p.pp) : static_cast<int>(r.grad_accum_steps());
  const std::string refusal = schedule_refusal(
      schedule, PipelineShape{static_cast<int>(p.pp), static_cast<int>(p.virtual_stages), micro_batches});
  if (!refusal.empty())
    fail("{}: {} (micro-batches per step = train.global_batch / (train.micro_batch * parallel.dp) = {} / ({} * {}))",
         at.of({"parallel.pp_schedule", "parallel.pp", "parallel.virtual_stages", "train.global_batch",
                "train.micro_batch", "parallel.dp"}),
         refusal, r.train.global_batch, r.train.micro_batch, p.dp);
  if (schedule == PipelineSchedule::zero_bubble && p.zero >= 2)
    fail("{}: parallel.pp_schedule = \"zero-bubble\" with parallel.zero = {}: the zero-bubble schedule computes "
         "weight gradients long after the input gradients, which ZeRO-2/3's per-layer gradient buckets cannot hold; "
         "set parallel.zero to 0 or 1, or choose another schedule",
         at.of({"parallel.pp_schedule", "parallel.zero"}), p.zero);
  if (schedule == PipelineSchedule::zero_bubble && r.train.recompute != "none")
    fail("{}: parallel.pp_schedule = \"zero-bubble\" with train.recompute = \"{}\": its deferred weight gradients "
         "need every activation kept; set train.recompute = \"none\" or choose another schedule",
         at.of({"parallel.pp_schedule", "train.recompute"}), r.train.recompute);
}

// log.trace_steps: a step range inside the run. A range past train.steps is refused rather
// than cut short: the run would end before writing the trace that was asked for.
void check_trace_steps(const Recipe& r, const Origins& at) {
  std::optional<StepRange> range;
  try {
    range = parse_step_range(r.log.trace_steps);
  } catch (const UserError& error) {
    fail("{}: log.trace_steps = {}", at.of({"log.trace_steps"}), error.what());
  }
  // The spans of every traced step stay in memory until the end of the run, and writing them
  // takes a multiple of their size: a trace is for a few steps.
  if (range && range->last - range->first + 1 > kMaxTracedSteps)
    fail("{}: log.trace_steps = \"{}\" traces {} steps; at most {} are recorded (their spans are kept in memory "
         "until the trace is written): trace a shorter range, e.g. \"{}-{}\"",
         at.of({"log.trace_steps"}), r.log.trace_steps, range->last - range->first + 1, kMaxTracedSteps,
         range->first, range->first + kMaxTracedSteps - 1);
  if (range && range->last > r.train.steps) {
    const std::string within = range->first < r.train.steps ? fmt::format("{}-{}", range->first, r.train.steps)
                                                            : fmt::format("{}", r.train.steps);
    fail("{}: log.trace_steps = \"{}\" reaches past train.steps = {}; trace steps within 1..{} (e.g. \"{}\") or "
         "train for more steps",
         at.of({"log.trace_steps", "train.steps"}), r.log.trace_steps, r.train.steps, r.train.steps, within);
  }
}

// Rules that tie keys together. Each message names every key involved with its value.
void check_cross_field_rules(const Recipe& r, const Origins& at, RecipeUse use) {
  const ModelSection& m = r.model;
  if (m.n_kv_heads > m.n_heads) {
    fail("{}: model.n_kv_heads = {} exceeds model.n_heads = {}; each key/value head serves "
         "one or more query heads, so set n_kv_heads <= n_heads",
         at.of({"model.n_kv_heads", "model.n_heads"}), m.n_kv_heads, m.n_heads);
  }
  if (m.n_heads % m.n_kv_heads != 0) {
    fail("{}: model.n_heads = {} is not a multiple of model.n_kv_heads = {}; every key/value "
         "head must serve the same number of query heads, so choose n_kv_heads dividing n_heads",
         at.of({"model.n_heads", "model.n_kv_heads"}), m.n_heads, m.n_kv_heads);
  }
  if (m.d_model % m.n_heads != 0) {
    fail("{}: model.d_model = {} is not divisible by model.n_heads = {}; each head gets "
         "d_model / n_heads dimensions, so change one of them",
         at.of({"model.d_model", "model.n_heads"}), m.d_model, m.n_heads);
  }
  if (r.head_dim() % 2 != 0) {
    fail("{}: head_dim = model.d_model / model.n_heads = {} / {} = {} is odd; RoPE rotates "
         "pairs of dimensions, so choose d_model and n_heads that give an even head_dim",
         at.of({"model.d_model", "model.n_heads"}), m.d_model, m.n_heads, r.head_dim());
  }
  if (m.rope_scaling == "llama3" && m.rope_high_freq_factor <= m.rope_low_freq_factor) {
    fail("{}: model.rope_high_freq_factor = {} is not above model.rope_low_freq_factor = {}; llama3 RoPE scaling "
         "blends the frequencies between the two wavelength limits, so the high factor must be the larger",
         at.of({"model.rope_high_freq_factor", "model.rope_low_freq_factor", "model.rope_scaling"}),
         m.rope_high_freq_factor, m.rope_low_freq_factor);
  }
  if (use == RecipeUse::model) return;  // the rest is about the data and the training run

  if (r.data.tokenizer == "byte" && m.vocab_size != 0 && m.vocab_size < 256) {
    fail("{}: model.vocab_size = {} is smaller than the 256 tokens of data.tokenizer = "
         "\"byte\"; set model.vocab_size >= 256",
         at.of({"model.vocab_size", "data.tokenizer"}), m.vocab_size);
  }
  const TrainSection& t = r.train;
  if (t.seq_len > m.max_seq_len) {
    fail("{}: train.seq_len = {} exceeds model.max_seq_len = {}; lower train.seq_len or raise "
         "model.max_seq_len",
         at.of({"train.seq_len", "model.max_seq_len"}), t.seq_len, m.max_seq_len);
  }
  // Compared by division first: micro_batch * dp may not fit in 64 bits. An unset dp (0)
  // waits for the launch; a global batch that is no multiple of micro_batch fails now.
  const std::int64_t dp = std::max<std::int64_t>(r.parallel.dp, 1);
  const bool fits = t.micro_batch <= t.global_batch / dp;
  if (!fits || t.global_batch % (t.micro_batch * dp) != 0) {
    fail("{}: train.global_batch = {} is not a multiple of train.micro_batch * parallel.dp = "
         "{} * {}; gradient accumulation needs a whole number of micro-batches per rank, so "
         "make global_batch a multiple of micro_batch * dp",
         at.of({"train.global_batch", "train.micro_batch", "parallel.dp"}), t.global_batch,
         t.micro_batch, dp);
  }
  if (t.eval_interval > 0 && t.eval_batches < 1) {
    fail("{}: train.eval_batches = {} with train.eval_interval = {}; a validation pass needs at "
         "least one batch, so set eval_batches >= 1, or eval_interval = 0 to disable validation",
         at.of({"train.eval_batches", "train.eval_interval"}), t.eval_batches, t.eval_interval);
  }
  if (r.schedule.min_lr > r.optim.lr) {
    fail("{}: schedule.min_lr = {} exceeds optim.lr = {}; the schedule decays from optim.lr "
         "down to min_lr, so set min_lr <= lr",
         at.of({"schedule.min_lr", "optim.lr"}), r.schedule.min_lr, r.optim.lr);
  }
  check_tensor_parallel_rules(r, at);
  check_pipeline_rules(r, at);
  if (const std::optional<std::string> problem = model_size_problem(r))
    fail("{}: {}", at.of({"model.n_layers", "model.d_model", "model.vocab_size", "model.ffn_hidden", "model.n_heads",
                          "model.n_kv_heads", "train.micro_batch", "train.seq_len"}),
         *problem);
  check_trace_steps(r, at);
  if (r.data.path.empty() && r.data.blend.empty()) {
    fail("{}: data.path is not set; run `ustrain data convert` first and set data.path to the "
         "dataset directory it writes (or data.blend to several)",
         at.of({"data.path"}));
  }
  if (!r.data.path.empty() && !r.data.blend.empty()) {
    fail("{}: both data.path and data.blend are set; data.blend lists every dataset with its weight, so "
         "remove data.path or list it in the blend",
         at.of({"data.path", "data.blend"}));
  }
  if (!r.data.blend.empty()) {
    try {
      parse_blend(r.data.blend);
    } catch (const UserError& error) {
      fail("{}: data.{}", at.of({"data.blend"}), error.what());
    }
  }
}

// What this build cannot run yet. As features land, their lines are deleted from here.
void check_supported_by_this_build(const Recipe& r, const Origins& at) {
  const ParallelSection& p = r.parallel;
  const std::tuple<std::string_view, std::int64_t, std::string_view> dimensions[] = {
      {"parallel.cp", p.cp, "context parallelism"},
      {"parallel.ep", p.ep, "expert parallelism"},
  };
  for (const auto& [key, value, what] : dimensions) {
    if (value > 1) {
      fail("{}: {} = {}: {} is not supported by this build yet; set {} = 1", at.of({key}), key,
           value, what, key);
    }
  }
  if (r.train.precision == "fp8") {
    fail("{}: train.precision = \"fp8\": fp8 GEMMs are not supported by this build yet; set train.precision = "
         "\"bf16\"",
         at.of({"train.precision"}));
  }
  if (r.device.type == "cuda" && (r.parallel.dp > 1 || r.parallel.tp > 1 || r.parallel.pp > 1)) {
    fail("{}: parallel.dp = {}, parallel.tp = {}, parallel.pp = {} with device.type = \"cuda\": training across several "
         "GPUs (NCCL) has not run on GPUs yet, so this build refuses it; set parallel.dp = parallel.tp = parallel.pp "
         "= 1 (one GPU), or train data-, tensor- and pipeline-parallel on CPUs",
         at.of({"parallel.dp", "parallel.tp", "parallel.pp", "device.type"}), r.parallel.dp, r.parallel.tp,
         r.parallel.pp);
  }
  if (r.device.type == "cpu" && r.train.precision != "fp32") {
    fail("{}: train.precision = \"{}\": the CPU backend computes in fp32; bf16/fp16/fp8 need "
         "the CUDA backend; set train.precision = \"fp32\" or device.type = \"cuda\"",
         at.of({"train.precision", "device.type"}), r.train.precision);
  }
}

// The meaning of a key followed by what it accepts, for comments and the reference.
std::string explain(const KeySpec& spec) {
  const std::string allowed = describe_allowed(spec);
  return allowed.empty() ? std::string(spec.meaning)
                         : fmt::format("{} ({})", spec.meaning, allowed);
}

// A '|' would end the table cell early.
std::string markdown_cell(const std::string& text) {
  std::string cell;
  for (char c : text) {
    if (c == '|') cell += '\\';
    cell += c;
  }
  return cell;
}

}  // namespace

std::string Recipe::run_dir() const { return run.output_dir + "/" + run.name; }

std::int64_t Recipe::grad_accum_steps() const {
  USTRAIN_ASSERT(parallel.dp > 0, "parallel.dp is unset: the recipe was not resolved for the launch");
  return train.global_batch / (train.micro_batch * parallel.dp);
}

bool Recipe::resolved() const { return model.vocab_size > 0 && data.tokenizer != "auto" && parallel.dp > 0; }

void check_recipe(const Recipe& r) {
  const Origins origins(r.source);
  check_cross_field_rules(r, origins, RecipeUse::run);
  check_supported_by_this_build(r, origins);
}

Recipe parse_recipe(const std::string& toml_text, const std::string& source,
                    const std::vector<std::string>& overrides, RecipeUse use) {
  toml::table doc;
  try {
    doc = toml::parse(std::string_view(toml_text), std::string_view(source));
  } catch (const toml::parse_error& e) {
    const toml::source_position& at = e.source().begin;
    fail("{}:{}:{}: TOML syntax error: {}", source, at.line, at.column, e.description());
  }
  Recipe r;
  r.source = source;
  Origins origins(source);
  apply_document(doc, source, r, origins);
  for (const std::string& assignment : overrides) apply_override(assignment, r, origins);
  check_cross_field_rules(r, origins, use);
  check_supported_by_this_build(r, origins);
  return r;
}

Recipe load_recipe(const std::string& path, const std::vector<std::string>& overrides, RecipeUse use) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    fail("{}: is a directory, not a recipe file; pass the path of a .toml recipe", path);
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    fail("{}: cannot open the recipe file ({}); check the path",
         path, std::generic_category().message(errno));
  }
  // Reads at most one chunk past the cap: `ustrain train /dev/zero` must not read forever.
  std::string text;
  char chunk[65536];
  while (text.size() <= kMaxRecipeBytes && in.read(chunk, sizeof chunk).gcount() > 0)
    text.append(chunk, static_cast<std::size_t>(in.gcount()));
  if (in.bad()) fail("{}: cannot read the recipe file; check the file and its permissions", path);
  if (text.size() > kMaxRecipeBytes)
    fail("{} is larger than {} MiB, which no recipe is (a recipe is a short TOML file); check the path", path,
         kMaxRecipeBytes >> 20);
  return parse_recipe(text, path, overrides, use);
}

std::string to_toml(const Recipe& r) {
  std::string out = "# ustrain recipe, resolved: every key is present, defaults filled in.\n";
  for (const SectionSpec& section : recipe_sections()) {
    std::vector<std::pair<std::string, std::string>> lines;  // (key = value, comment)
    std::size_t width = 0;
    for (const KeySpec& spec : recipe_keys()) {
      if (spec.section() != section.name) continue;
      lines.emplace_back(fmt::format("{} = {}", spec.name(), toml_literal(read_field(spec, r))),
                         explain(spec));
      width = std::max(width, lines.back().first.size());
    }
    out += fmt::format("\n[{}]  # {}\n", section.name, section.meaning);
    for (const auto& [assignment, comment] : lines) {
      out += fmt::format("{:<{}}  # {}\n", assignment, width, comment);
    }
  }
  return out;
}

std::vector<std::pair<std::string, std::string>> recipe_values(const Recipe& r) {
  std::vector<std::pair<std::string, std::string>> values;
  for (const KeySpec& spec : recipe_keys()) values.emplace_back(std::string(spec.key), toml_literal(read_field(spec, r)));
  return values;
}

std::string recipe_reference_markdown() {
  const Recipe defaults;
  std::string out;
  for (const SectionSpec& section : recipe_sections()) {
    if (!out.empty()) out += "\n";
    out += fmt::format("### [{}]\n\n{}.\n\n| key | type | default | meaning |\n|---|---|---|---|\n",
                       section.name, section.meaning);
    for (const KeySpec& spec : recipe_keys()) {
      if (spec.section() != section.name) continue;
      out += fmt::format("| `{}` | {} | `{}` | {} |\n", spec.key, value_type_name(spec.type),
                         markdown_cell(toml_literal(read_field(spec, defaults))),
                         markdown_cell(explain(spec)));
    }
  }
  return out;
}

}  // namespace ustrain
