// The recipe schema: one row per key of Recipe, saying its type, allowed values and
// meaning, and where it lives in the struct. Parsing, `--set` overrides, suggestions for
// misspelt keys, to_toml and the Markdown reference are all driven by this one table.
// Private to core/recipe*.cpp.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "core/recipe/recipe.h"

namespace ustrain {

enum class ValueType { integer, floating, boolean, string };
// "integer", "float", "boolean", "string": the TOML names, as users see them.
const char* value_type_name(ValueType t);

// One TOML scalar, already type-checked (an integer given for a float key is converted).
using Scalar = std::variant<std::int64_t, double, bool, std::string>;
// Where a key is stored inside a Recipe; the seed is the one unsigned field.
using FieldRef = std::variant<std::int64_t*, std::uint64_t*, double*, bool*, std::string*>;

// A visitor for std::visit made of lambdas, one per alternative.
template <class... Fs>
struct Overloaded : Fs... {
  using Fs::operator()...;
};
// Spelled out for compilers without C++20's deduction for aggregates (clang before 17).
template <class... Fs>
Overloaded(Fs...) -> Overloaded<Fs...>;

struct Bound {
  double value;
  bool inclusive;
};

// What a key accepts beyond its type. Empty means any value of the type.
struct Allowed {
  std::optional<Bound> min;
  std::optional<Bound> max;
  std::vector<std::string_view> choices;
  bool plain_name = false;  // a single directory name: no '/', not "", "." or ".."
  bool non_empty = false;
  bool list = false;  // a string that may also be written as a TOML array of strings (joined by commas)
};

struct KeySpec {
  std::string_view key;  // dotted: "model.d_model"
  FieldRef (*field)(Recipe&);
  ValueType type;
  Allowed allowed;
  std::string_view meaning;

  std::string_view section() const { return key.substr(0, key.find('.')); }
  std::string_view name() const { return key.substr(key.find('.') + 1); }
};

struct SectionSpec {
  std::string_view name;
  std::string_view meaning;
};

// In the order they are documented and written out.
const std::vector<SectionSpec>& recipe_sections();
const std::vector<KeySpec>& recipe_keys();

const SectionSpec* find_section(std::string_view name);
const KeySpec* find_key(std::string_view dotted_key);
// The valid key nearest to a misspelt one (also across sections: train.lr -> optim.lr),
// or nullopt when nothing is close enough to be a plausible typo.
std::optional<std::string> suggest_key(std::string_view dotted_key);
std::optional<std::string> suggest_section(std::string_view name);

Scalar read_field(const KeySpec& spec, const Recipe& r);
// `value` must hold the alternative for spec.type (see coerce).
void write_field(const KeySpec& spec, Recipe& r, const Scalar& value);

ValueType type_of(const Scalar& value);
// The value as spec.type, or nullopt when its type does not fit (integer -> float is fine).
std::optional<Scalar> coerce(const KeySpec& spec, const Scalar& value);
// Why the (type-correct) value is not allowed, e.g. "must be >= 1"; nullopt when fine.
std::optional<std::string> violation(const KeySpec& spec, const Scalar& value);
// The allowed values in words (">= 1", "one of: cpu, cuda"); empty when any value works.
std::string describe_allowed(const KeySpec& spec);

// The value as TOML source text; parsing it back yields exactly the same value.
std::string toml_literal(const Scalar& value);

}  // namespace ustrain
