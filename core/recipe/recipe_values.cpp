// A value against its key: its type, the values the key allows, and its TOML text.
#include "core/recipe/recipe_schema.h"

#include <fmt/format.h>
#include <toml++/toml.h>

#include <algorithm>
#include <cmath>
#include <sstream>

namespace ustrain {
namespace {

std::string format_bound(double v) { return fmt::format("{}", v); }

}  // namespace

const char* value_type_name(ValueType t) {
  switch (t) {
    case ValueType::integer: return "integer";
    case ValueType::floating: return "float";
    case ValueType::boolean: return "boolean";
    case ValueType::string: return "string";
  }
  return "?";
}

ValueType type_of(const Scalar& value) {
  return std::visit(Overloaded{[](std::int64_t) { return ValueType::integer; },
                               [](double) { return ValueType::floating; },
                               [](bool) { return ValueType::boolean; },
                               [](const std::string&) { return ValueType::string; }},
                    value);
}

std::optional<Scalar> coerce(const KeySpec& spec, const Scalar& value) {
  const ValueType given = type_of(value);
  if (given == spec.type) return value;
  if (given == ValueType::integer && spec.type == ValueType::floating) {
    return Scalar{static_cast<double>(std::get<std::int64_t>(value))};
  }
  return std::nullopt;
}

std::string describe_allowed(const KeySpec& spec) {
  const Allowed& a = spec.allowed;
  if (!a.choices.empty()) return fmt::format("one of: {}", fmt::join(a.choices, ", "));
  if (a.plain_name) return "a plain directory name: not empty, at most 255 bytes, no '/', not '.' or '..'";
  if (a.non_empty) return "not empty";
  if (a.min && a.max) {
    if (spec.type == ValueType::integer) {
      return fmt::format("{} to {}", format_bound(a.min->value), format_bound(a.max->value));
    }
    return fmt::format("in {}{}, {}{}", a.min->inclusive ? '[' : '(', format_bound(a.min->value),
                       format_bound(a.max->value), a.max->inclusive ? ']' : ')');
  }
  if (a.min) return fmt::format("{} {}", a.min->inclusive ? ">=" : ">", format_bound(a.min->value));
  if (a.max) return fmt::format("{} {}", a.max->inclusive ? "<=" : "<", format_bound(a.max->value));
  return "";
}

std::optional<std::string> violation(const KeySpec& spec, const Scalar& value) {
  const Allowed& a = spec.allowed;
  if (const auto* s = std::get_if<std::string>(&value)) {
    if (s->find('\0') != std::string::npos) return "must not contain a NUL character";
    const bool bad_choice =
        !a.choices.empty() && std::find(a.choices.begin(), a.choices.end(), *s) == a.choices.end();
    // 255 bytes: the longest name a Linux filesystem takes for one directory (NAME_MAX).
    const bool bad_name = a.plain_name && (s->empty() || s->size() > 255 || *s == "." || *s == ".." ||
                                           s->find('/') != std::string::npos);
    const bool bad_empty = a.non_empty && s->empty();
    if (bad_choice || bad_name || bad_empty) return "must be " + describe_allowed(spec);
    return std::nullopt;
  }
  double number = 0;
  if (const auto* i = std::get_if<std::int64_t>(&value)) number = static_cast<double>(*i);
  else if (const auto* d = std::get_if<double>(&value)) number = *d;
  else return std::nullopt;  // booleans accept both values
  if (!std::isfinite(number)) return "must be a finite number";
  const bool below = a.min && (a.min->inclusive ? number < a.min->value : number <= a.min->value);
  const bool over = a.max && (a.max->inclusive ? number > a.max->value : number >= a.max->value);
  if (below || over) return "must be " + describe_allowed(spec);
  return std::nullopt;
}

std::string toml_literal(const Scalar& value) {
  return std::visit(
      Overloaded{[](std::int64_t v) { return fmt::format("{}", v); },
                 [](double v) {
                   // fmt writes the shortest text that reads back to the same double; TOML
                   // needs a '.' or an exponent to see a float rather than an integer.
                   std::string text = fmt::format("{}", v);
                   if (text.find_first_of(".eEn") == std::string::npos) text += ".0";
                   return text;
                 },
                 [](bool v) { return std::string(v ? "true" : "false"); },
                 [](const std::string& v) {
                   std::ostringstream out;
                   out << toml::toml_formatter{toml::value<std::string>{v},
                                               toml::format_flags::allow_unicode_strings};
                   return out.str();
                 }},
      value);
}

}  // namespace ustrain
