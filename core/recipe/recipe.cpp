// Reading a recipe: TOML text -> typed fields (via the schema) -> overrides -> rules that
// tie keys together -> what this build supports. Every failure is one message that names
// where the value came from ("FILE:LINE" or "--set KEY=VALUE") and what to do; all of a
// recipe's are reported together, in one UserError (core/recipe/recipe_errors.h).
#include "core/recipe/recipe.h"

#include <fmt/format.h>
#include <sys/stat.h>
#include <toml++/toml.h>

#include <algorithm>
#include <cerrno>
#include <fstream>
#include <optional>
#include <string_view>
#include <system_error>
#include <tuple>
#include <vector>

#include "core/recipe/recipe_checks.h"
#include "core/recipe/recipe_schema.h"
#include "data/files/regular_file.h"
#include "kernels/error.h"

namespace ustrain {
namespace {

// The largest recipe file read.
constexpr std::size_t kMaxRecipeBytes = std::size_t{16} << 20;

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

// How to write `spec` where `where` says the value came from: `KEY = VALUE` in a recipe file;
// `--set 'KEY=VALUE'` on a command line, where the shell's quotes keep a TOML string's own
// (`--set log.trace_steps="10"` reaches ustrain as the integer 10). A number or boolean given
// for a string is shown quoted; otherwise the key's default shows the form.
std::string example_assignment(const KeySpec& spec, const std::optional<Scalar>& given, const std::string& where) {
  const bool quote_given = spec.type == ValueType::string && given && type_of(*given) != ValueType::string;
  const std::string literal = quote_given ? toml_literal(Scalar{toml_literal(*given)})
                                          : toml_literal(read_field(spec, Recipe{}));
  if (!where.starts_with("--set ")) return fmt::format("{} = {}", spec.key, literal);
  if (literal.find_first_of("\"' ") == std::string::npos) return fmt::format("--set {}={}", spec.key, literal);
  return fmt::format("--set '{}={}'", spec.key, literal);
}

// A list key's array of strings as the one string it is stored as: the items joined by commas.
std::optional<Scalar> list_of(const toml::array& items) {
  std::string joined;
  for (const toml::node& item : items) {
    const auto* text = item.as_string();
    if (!text) return std::nullopt;
    joined += (joined.empty() ? "" : ",") + text->get();
  }
  return Scalar{joined};
}

// Type-checks and range-checks one value, then stores it.
void assign(const KeySpec& spec, const toml::node& node, const std::string& where, Recipe& r) {
  const toml::array* items = spec.allowed.list ? node.as_array() : nullptr;
  const std::optional<Scalar> given = items ? list_of(*items) : scalar_of(node);
  const std::optional<Scalar> value = given ? coerce(spec, *given) : std::nullopt;
  if (!value) {
    fail("{}: {}: expected {}, found {}; write it like {}", where, spec.key, value_type_name(spec.type),
         describe_found(node), example_assignment(spec, given, where));
  }
  if (std::optional<std::string> problem = violation(spec, *value)) {
    fail("{}: {} = {} is not allowed: it {}", where, spec.key, abbreviate(toml_literal(*value)), *problem);
  }
  write_field(spec, r, *value);
}

// One entry of a recipe file: a key of a section, or a top-level entry.
struct Entry {
  const toml::key* section;
  const toml::key* key;  // null for a top-level entry that is not a known section table
  const toml::node* node;
  const toml::source_position& position() const { return (key != nullptr ? key : section)->source().begin; }
};

void apply_entry(const Entry& e, const std::string& source, Recipe& r, Origins& origins) {
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

void apply_document(const toml::table& root, const std::string& source, Recipe& r, Origins& origins,
                    RecipeErrors& errors) {
  // toml++ orders keys by name; report problems in the order they appear in the file.
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
    if (!errors.attempt([&] { apply_entry(e, source, r, origins); }) && e.key != nullptr)
      origins.refuse(fmt::format("{}.{}", e.section->str(), e.key->str()));
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

}  // namespace

std::string Recipe::run_dir() const { return run.output_dir + "/" + run.name; }

std::int64_t Recipe::grad_accum_steps() const {
  USTRAIN_ASSERT(parallel.dp > 0, "parallel.dp is unset: the recipe was not resolved for the launch");
  return train.global_batch / (train.micro_batch * parallel.dp);
}

bool Recipe::resolved() const { return model.vocab_size > 0 && data.tokenizer != "auto" && parallel.dp > 0; }

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
  RecipeErrors errors;
  apply_document(doc, source, r, origins, errors);
  for (const std::string& assignment : overrides) {
    if (!errors.attempt([&] { apply_override(assignment, r, origins); }))
      origins.refuse(trim(std::string_view(assignment).substr(0, assignment.find('='))));
  }
  check_cross_field_rules(r, origins, use, errors);
  check_supported_by_this_build(r, origins, errors);
  errors.throw_if_any(source);
  return r;
}

Recipe load_recipe(const std::string& path, const std::vector<std::string>& overrides, RecipeUse use) {
  // Only a regular file is read: opening a FIFO waits for a writer, forever when none comes,
  // and a device such as /dev/zero never ends.
  struct stat st {};
  const bool found = ::stat(path.c_str(), &st) == 0;
  if (found && S_ISDIR(st.st_mode)) fail("{}: is a directory, not a recipe file; pass the path of a .toml recipe", path);
  if (found && !S_ISREG(st.st_mode))
    fail("{} is {}, not a regular file; pass the path of a .toml recipe", path, file_kind(st.st_mode));
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    fail("{}: cannot open the recipe file ({}); check the path",
         path, std::generic_category().message(errno));
  }
  // Reads at most one chunk past the cap, even of a file that grows while it is read.
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

}  // namespace ustrain
