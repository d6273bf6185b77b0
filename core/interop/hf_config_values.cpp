#include "core/interop/hf_config_values.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "kernels/error.h"

namespace ustrain {
namespace {

std::int64_t integer_in(const nlohmann::json& v, const std::string& what, const std::string& path, std::int64_t lo,
                        std::int64_t hi) {
  bool ok = false;
  std::int64_t value = 0;
  if (v.is_number_unsigned()) {
    const auto u = v.get<std::uint64_t>();
    ok = u <= static_cast<std::uint64_t>(INT64_MAX);
    value = ok ? static_cast<std::int64_t>(u) : 0;
  } else if (v.is_number_integer()) {
    ok = true;
    value = v.get<std::int64_t>();
  }
  if (ok && value >= lo && value <= hi) return value;
  std::string shown = v.dump();
  if (shown.size() > 40) shown = shown.substr(0, 40) + "...";
  const std::string range =
      lo == INT64_MIN && hi == INT64_MAX ? "an integer" : fmt::format("an integer in [{}, {}]", lo, hi);
  throw UserError(fmt::format("{}: {} is {}, not {}; fix config.json", path, what, shown, range));
}

bool present(const nlohmann::json& config, const char* key) {
  return config.is_object() && config.contains(key) && !config[key].is_null();
}

}  // namespace

std::int64_t config_integer(const nlohmann::json& config, const char* key, const std::string& path, std::int64_t lo,
                            std::int64_t hi) {
  if (!present(config, key)) throw UserError(fmt::format("{}: {} is missing; a usable config states it", path, key));
  return integer_in(config[key], key, path, lo, hi);
}

std::int64_t config_integer_or(const nlohmann::json& config, const char* key, std::int64_t fallback,
                               const std::string& path, std::int64_t lo, std::int64_t hi) {
  return present(config, key) ? integer_in(config[key], key, path, lo, hi) : fallback;
}

std::vector<std::int64_t> config_integers(const nlohmann::json& config, const char* key, const std::string& path,
                                          std::int64_t lo, std::int64_t hi) {
  std::vector<std::int64_t> out;
  if (!present(config, key)) return out;
  const nlohmann::json& list = config[key];
  if (!list.is_array()) throw UserError(fmt::format("{}: {} is not a list of integers; fix config.json", path, key));
  for (std::size_t i = 0; i < list.size(); ++i)
    out.push_back(integer_in(list[i], fmt::format("{}[{}]", key, i), path, lo, hi));
  return out;
}

}  // namespace ustrain
