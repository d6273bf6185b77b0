// Number checks for options. CLI11's NonNegativeNumber and PositiveNumber print their range
// with the largest double written out, 309 digits long; these say what is wanted in words.
#pragma once

#include <CLI/CLI.hpp>

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <string>

#include "kernels/error.h"

namespace ustrain::app {

// `zero_allowed`: 0 or more, else more than 0.
inline CLI::Validator sign_check(bool zero_allowed) {
  return CLI::Validator(
      [zero_allowed](std::string& text) -> std::string {
        // strtod, not std::stod: stod throws for a number too small for a double (1e-320), which
        // is a number all the same; one too large for a double is said to be so.
        errno = 0;
        char* end = nullptr;
        const double value = text.empty() ? 0 : std::strtod(text.c_str(), &end);
        const bool whole = !text.empty() && end == text.c_str() + text.size();
        const std::string shown = abbreviate(text);
        if (!whole || std::isnan(value)) return shown + " is not a number";
        if (std::isinf(value)) return shown + " is too large";
        if (zero_allowed && value < 0) return shown + " is negative: it must be 0 or more";
        if (!zero_allowed && value <= 0) return shown + " must be more than 0";
        return {};
      },
      zero_allowed ? "NONNEGATIVE" : "POSITIVE");
}

inline CLI::Validator non_negative() { return sign_check(true); }
inline CLI::Validator positive() { return sign_check(false); }

}  // namespace ustrain::app
