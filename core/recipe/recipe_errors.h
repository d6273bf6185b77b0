// A recipe's mistakes, collected so that one run reports them all: every unknown key, wrong
// type and value out of range, and each group of rules that tie keys together. Private to
// core/recipe/*.cpp.
#pragma once

#include <functional>
#include <string>
#include <vector>

namespace ustrain {

class RecipeErrors {
 public:
  // Runs `check`; a UserError it throws is kept, unless `relevant` (when given) says after it
  // that the error follows from one already kept. Returns whether the check passed.
  bool attempt(const std::function<void()>& check, const std::function<bool()>& relevant = {});
  // One UserError holding every message kept: a single one as it is, several one per line
  // under "`source` has N problems:". Nothing when none was kept.
  void throw_if_any(const std::string& source) const;

 private:
  std::vector<std::string> messages_;
};

}  // namespace ustrain
