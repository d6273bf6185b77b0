// Number checks for options. CLI11's NonNegativeNumber and PositiveNumber print their range
// with the largest double written out, 309 digits long; these say what is wanted in words.
#pragma once

#include <CLI/CLI.hpp>

#include <cmath>
#include <string>

namespace ustrain::app {

// `zero_allowed`: 0 or more, else more than 0.
inline CLI::Validator sign_check(bool zero_allowed) {
  return CLI::Validator(
      [zero_allowed](std::string& text) -> std::string {
        double value = 0;
        std::size_t used = 0;
        try {
          value = std::stod(text, &used);
        } catch (const std::exception&) {
          used = 0;
        }
        if (used != text.size() || std::isnan(value)) return text + " is not a number";
        if (zero_allowed && value < 0) return text + " is negative: it must be 0 or more";
        if (!zero_allowed && value <= 0) return text + " must be more than 0";
        return {};
      },
      zero_allowed ? "NONNEGATIVE" : "POSITIVE");
}

inline CLI::Validator non_negative() { return sign_check(true); }
inline CLI::Validator positive() { return sign_check(false); }

}  // namespace ustrain::app
