#include "core/checkpoint/safetensors.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <tuple>
#include <nlohmann/json.hpp>

#include "data/files/json_input.h"
#include "kernels/error.h"

namespace ustrain {
namespace {

struct DTypeSize {
  std::string_view name;
  std::size_t bytes;
};

// Every dtype of the safetensors specification, so that foreign files list cleanly.
constexpr DTypeSize kDTypes[] = {{"BOOL", 1}, {"U8", 1},   {"I8", 1},   {"F8_E4M3", 1}, {"F8_E5M2", 1},
                                 {"I16", 2},  {"U16", 2},  {"F16", 2},  {"BF16", 2},    {"I32", 4},
                                 {"U32", 4},  {"F32", 4},  {"I64", 8},  {"U64", 8},     {"F64", 8}};

[[noreturn]] void corrupt(const std::string& file, const std::string& what) {
  throw UserError(fmt::format("{}: not a valid safetensors file: {}; the file is damaged or was "
                              "not written completely",
                              file, what));
}

SafetensorsEntry parse_entry(const std::string& name, const nlohmann::json& j, const std::string& file) {
  if (!j.is_object()) corrupt(file, fmt::format("entry \"{}\" is not an object", name));
  SafetensorsEntry e;
  e.name = name;
  const auto dtype = j.find("dtype");
  const auto shape = j.find("shape");
  const auto offsets = j.find("data_offsets");
  if (dtype == j.end() || !dtype->is_string() || shape == j.end() || !shape->is_array() ||
      offsets == j.end() || !offsets->is_array() || offsets->size() != 2)
    corrupt(file, fmt::format("entry \"{}\" lacks dtype, shape or data_offsets", name));
  e.dtype = dtype->get<std::string>();
  const std::size_t element = safetensors_dtype_size(e.dtype);
  if (element == 0) corrupt(file, fmt::format("entry \"{}\" has the unknown dtype \"{}\"", name, e.dtype));
  // The element count and the byte count must fit in 63 bits: a shape whose product overflows
  // would otherwise pass for a small tensor.
  std::int64_t elements = 1;
  for (const auto& d : *shape) {
    if (!d.is_number_unsigned()) corrupt(file, fmt::format("entry \"{}\" has a malformed shape", name));
    const std::uint64_t extent = d.get<std::uint64_t>();
    if (extent > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()) ||
        __builtin_mul_overflow(elements, static_cast<std::int64_t>(extent), &elements))
      corrupt(file, fmt::format("entry \"{}\" has a shape whose element count overflows 64 bits", name));
    e.shape.push_back(static_cast<std::int64_t>(extent));
  }
  std::int64_t bytes = 0;
  if (__builtin_mul_overflow(elements, static_cast<std::int64_t>(element), &bytes))
    corrupt(file, fmt::format("entry \"{}\" has a shape whose byte count overflows 64 bits", name));
  for (const auto& o : *offsets)
    if (!o.is_number_unsigned()) corrupt(file, fmt::format("entry \"{}\" has malformed data_offsets", name));
  e.begin = (*offsets)[0].get<std::uint64_t>();
  e.end = (*offsets)[1].get<std::uint64_t>();
  if (e.end < e.begin || e.end - e.begin != static_cast<std::uint64_t>(bytes))
    corrupt(file, fmt::format("entry \"{}\": data_offsets [{}, {}) do not hold {} {} elements", name, e.begin,
                              e.end, e.numel(), e.dtype));
  return e;
}

// As the format requires, the entries (sorted by offsets) lie back to back from byte 0, empty
// ones included: no two share a byte and no byte lies between them. Every entry of the header
// counts, whether or not a reader uses it. Returns the end of the last one.
std::uint64_t check_back_to_back(const std::vector<SafetensorsEntry>& entries, const std::string& file) {
  std::uint64_t at = 0;
  const SafetensorsEntry* previous = nullptr;  // the last entry that holds bytes
  for (const SafetensorsEntry& e : entries) {
    if (e.begin < at)
      corrupt(file, fmt::format("entries \"{}\" [{}, {}) and \"{}\" [{}, {}) overlap; every tensor needs bytes of its "
                                "own", previous->name, previous->begin, previous->end, e.name, e.begin, e.end));
    if (e.begin > at)
      corrupt(file, fmt::format("bytes [{}, {}) before entry \"{}\" belong to no tensor; the tensors must lie back "
                                "to back", at, e.begin, e.name));
    if (e.end > e.begin) previous = &e;
    at = e.end;
  }
  return at;
}

}  // namespace

std::int64_t SafetensorsEntry::numel() const {
  std::int64_t n = 1;
  for (std::int64_t d : shape) n *= d;
  return n;
}

const SafetensorsEntry* SafetensorsHeader::find(std::string_view name) const {
  for (const SafetensorsEntry& e : entries)
    if (e.name == name) return &e;
  return nullptr;
}

std::size_t safetensors_dtype_size(std::string_view dtype) {
  for (const DTypeSize& d : kDTypes)
    if (d.name == dtype) return d.bytes;
  return 0;
}

std::uint64_t lay_out_entries(std::vector<SafetensorsEntry>& entries) {
  std::uint64_t at = 0;
  for (SafetensorsEntry& e : entries) {
    const std::size_t element = safetensors_dtype_size(e.dtype);
    USTRAIN_ASSERT(element > 0, "unknown safetensors dtype " + e.dtype);
    e.begin = at;
    e.end = at + static_cast<std::uint64_t>(e.numel()) * element;
    at = e.end;
  }
  return at;
}

std::string encode_safetensors_header(const std::vector<SafetensorsEntry>& entries,
                                      const SafetensorsMetadata& metadata) {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  for (const SafetensorsEntry& e : entries)
    header[e.name] = {{"dtype", e.dtype}, {"shape", e.shape}, {"data_offsets", {e.begin, e.end}}};
  std::string json = header.dump();
  json.append((8 - json.size() % 8) % 8, ' ');  // the data then starts 8-byte aligned
  std::string out(8, '\0');
  const std::uint64_t n = json.size();
  for (int i = 0; i < 8; ++i) out[static_cast<std::size_t>(i)] = static_cast<char>((n >> (8 * i)) & 0xFF);
  return out + json;
}

SafetensorsHeader decode_safetensors_header(std::string_view json, const std::string& file) {
  nlohmann::json header;
  try {
    header = parse_json(json, file);
  } catch (const nlohmann::json::exception&) {  // parse_error, or out_of_range for a number beyond a double
    corrupt(file, "its JSON header does not parse");
  }
  if (!header.is_object()) corrupt(file, "its JSON header is not an object");
  SafetensorsHeader h;
  h.data_offset = 8 + json.size();
  for (const auto& [name, value] : header.items()) {
    if (name == "__metadata__") {
      if (!value.is_object()) corrupt(file, "__metadata__ is not an object");
      for (const auto& [k, v] : value.items()) {
        if (!v.is_string()) corrupt(file, fmt::format("__metadata__ value \"{}\" is not a string", k));
        h.metadata[k] = v.get<std::string>();
      }
      continue;
    }
    h.entries.push_back(parse_entry(name, value, file));
  }
  std::sort(h.entries.begin(), h.entries.end(), [](const SafetensorsEntry& a, const SafetensorsEntry& b) {
    return std::tie(a.begin, a.end, a.name) < std::tie(b.begin, b.end, b.name);
  });
  h.data_bytes = check_back_to_back(h.entries, file);
  return h;
}

}  // namespace ustrain
