// Reading and writing a recipe field through its schema row.
#include "core/recipe/recipe_schema.h"

#include "kernels/error.h"

namespace ustrain {

Scalar read_field(const KeySpec& spec, const Recipe& r) {
  // The accessor only hands out an address; reading through it leaves r unchanged.
  const FieldRef field = spec.field(const_cast<Recipe&>(r));
  return std::visit(Overloaded{[](std::int64_t* p) { return Scalar{*p}; },
                               [](std::uint64_t* p) { return Scalar{static_cast<std::int64_t>(*p)}; },
                               [](double* p) { return Scalar{*p}; },
                               [](bool* p) { return Scalar{*p}; },
                               [](std::string* p) { return Scalar{*p}; }},
                    field);
}

void write_field(const KeySpec& spec, Recipe& r, const Scalar& value) {
  USTRAIN_ASSERT(type_of(value) == spec.type, std::string(spec.key));
  std::visit(Overloaded{[&](std::int64_t* p) { *p = std::get<std::int64_t>(value); },
                        [&](std::uint64_t* p) {
                          const std::int64_t v = std::get<std::int64_t>(value);
                          USTRAIN_ASSERT(v >= 0, std::string(spec.key));
                          *p = static_cast<std::uint64_t>(v);
                        },
                        [&](double* p) { *p = std::get<double>(value); },
                        [&](bool* p) { *p = std::get<bool>(value); },
                        [&](std::string* p) { *p = std::get<std::string>(value); }},
             spec.field(r));
}

}  // namespace ustrain
