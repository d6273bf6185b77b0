// What the recipe schema's tables (recipe_schema.cpp, recipe_schema_model.cpp) are written
// with: what a key allows, a row whose type comes from the field itself, and shared bounds.
// Internal to core/recipe.
#pragma once

#include <optional>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "core/recipe/recipe.h"
#include "core/recipe/recipe_schema.h"

namespace ustrain::recipe_rules {

// Each names what a key allows; the rest of Allowed stays at "anything".
inline Allowed any_value() { return {}; }
inline Allowed between(std::optional<Bound> lo, std::optional<Bound> hi) {
  Allowed a;
  a.min = lo;
  a.max = hi;
  return a;
}
inline Allowed at_least(double v) { return between(Bound{v, true}, std::nullopt); }
inline Allowed above(double v) { return between(Bound{v, false}, std::nullopt); }
inline Allowed one_of(std::vector<std::string_view> choices) {
  Allowed a;
  a.choices = std::move(choices);
  return a;
}
inline Allowed flagged(bool Allowed::*flag) {
  Allowed a;
  a.*flag = true;
  return a;
}
inline Allowed plain_name() { return flagged(&Allowed::plain_name); }
inline Allowed non_empty() { return flagged(&Allowed::non_empty); }
inline Allowed path_list() { return flagged(&Allowed::list); }

inline ValueType field_type(FieldRef field) {
  return std::visit(Overloaded{[](std::int64_t*) { return ValueType::integer; },
                               [](std::uint64_t*) { return ValueType::integer; },
                               [](double*) { return ValueType::floating; },
                               [](bool*) { return ValueType::boolean; },
                               [](std::string*) { return ValueType::string; }},
                    field);
}

// The type comes from the field itself, so the table cannot disagree with the struct.
inline KeySpec key(std::string_view dotted, FieldRef (*field)(Recipe&), Allowed allowed,
            std::string_view meaning) {
  Recipe probe;
  return {dotted, field, field_type(field(probe)), std::move(allowed), meaning};
}

// Spells the key once: "model.d_model" and the accessor of r.model.d_model.
#define USTRAIN_RECIPE_FIELD(path) #path, [](Recipe& r) -> FieldRef { return &r.path; }

// Bounds several sections use.
constexpr Bound zero_in{0.0, true};
constexpr Bound zero_out{0.0, false};
constexpr Bound one_in{1.0, true};
constexpr Bound one_out{1.0, false};

// The rows of the [model] section (recipe_schema_model.cpp).
std::vector<KeySpec> model_keys();

}  // namespace ustrain::recipe_rules
