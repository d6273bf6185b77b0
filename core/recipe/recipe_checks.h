// The rules a recipe must satisfy beyond each key's own type and range: those that tie keys
// together, and what this build supports. Each refusal is one message naming where the keys
// involved got their values; independent groups of rules are all asked, and their refusals
// reported together (core/recipe/recipe_errors.h). Private to core/recipe/*.cpp.
#pragma once

#include <fmt/format.h>

#include <functional>
#include <initializer_list>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <utility>

#include "core/recipe/recipe.h"
#include "core/recipe/recipe_errors.h"
#include "kernels/error.h"

namespace ustrain {

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
    for (std::string_view key : keys) named_refused_ = named_refused_ || refused_.contains(key);
    return latest != nullptr ? latest->second : source_;
  }

  // A key whose value was refused keeps its default, which rules about it would judge instead.
  void refuse(std::string_view key) { refused_.emplace(key); }
  // Whether of() named a refused key since forget_named(): the rule then judged a default.
  bool named_refused() const { return named_refused_; }
  void forget_named() const { named_refused_ = false; }

 private:
  std::string source_;
  std::set<std::string, std::less<>> refused_;
  mutable bool named_refused_ = false;
  int count_ = 0;
  std::map<std::string, std::pair<int, std::string>, std::less<>> where_;
};

template <class... Args>
[[noreturn]] void fail(fmt::format_string<Args...> format, Args&&... args) {
  throw UserError(fmt::format(format, std::forward<Args>(args)...));
}

// Rules that tie keys together; for RecipeUse::model only those about the model itself. Each
// group's refusal goes to `errors`, unless it is about a key whose value was refused.
void check_cross_field_rules(const Recipe& r, const Origins& at, RecipeUse use, RecipeErrors& errors);

// What this build cannot run yet.
void check_supported_by_this_build(const Recipe& r, const Origins& at, RecipeErrors& errors);

}  // namespace ustrain
