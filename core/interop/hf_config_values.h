// Integers of a Hugging Face config.json, read with a check: nlohmann's get<std::int64_t>()
// converts a float such as 1e30 or a huge unsigned value with undefined behaviour, and a
// config written by another tool may hold either.
#pragma once

#include <nlohmann/json_fwd.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace ustrain {

// config[key], which must be present and an integer in [lo, hi]; otherwise a UserError naming
// `path`, the key and the value.
std::int64_t config_integer(const nlohmann::json& config, const char* key, const std::string& path,
                            std::int64_t lo = INT64_MIN, std::int64_t hi = INT64_MAX);
// As config_integer, or `fallback` when the key is absent or null.
std::int64_t config_integer_or(const nlohmann::json& config, const char* key, std::int64_t fallback,
                               const std::string& path, std::int64_t lo = INT64_MIN, std::int64_t hi = INT64_MAX);
// config[key] as a list of integers in [lo, hi]; empty when absent or null.
std::vector<std::int64_t> config_integers(const nlohmann::json& config, const char* key, const std::string& path,
                                          std::int64_t lo = INT64_MIN, std::int64_t hi = INT64_MAX);

}  // namespace ustrain
