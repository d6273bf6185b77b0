#include "core/eval/task_file.h"

#include <fmt/format.h>

#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>
#include <string_view>

#include "data/files/json_input.h"
#include "data/files/regular_file.h"
#include "kernels/error.h"

namespace ustrain {
namespace {

using Json = nlohmann::json;

constexpr const char* kItemForm = R"({"context": "text", "choices": ["text", ...], "answer": index})";

// What is wrong with line `line` of `path`, and the form every line must have.
[[noreturn]] void bad_line(const std::string& path, std::int64_t line, const std::string& what) {
  throw UserError(fmt::format("task file {} line {}: {}; each line must be one item like {}", path, line, what,
                              kItemForm));
}

const char* json_kind(const Json& v) {
  switch (v.type()) {
    case Json::value_t::null: return "null";
    case Json::value_t::object: return "an object";
    case Json::value_t::array: return "an array";
    case Json::value_t::string: return "a string";
    case Json::value_t::boolean: return "a boolean";
    case Json::value_t::number_float: return "a fractional number";
    default: return "a number";
  }
}

// One line's item, tokenized; `where` reports what is wrong.
TaskItem parse_item(const Json& j, const Tokenizer& tokenizer, std::int64_t seq_len,
                    const std::function<void(const std::string&)>& fail) {
  if (!j.is_object()) fail(fmt::format("found {}, not a JSON object", json_kind(j)));
  for (const char* key : {"context", "choices", "answer"})
    if (!j.contains(key)) fail(fmt::format("the key \"{}\" is missing", key));
  const Json& context = j["context"];
  const Json& choices = j["choices"];
  const Json& answer = j["answer"];
  if (!context.is_string()) fail(fmt::format("\"context\" is {}, not a string", json_kind(context)));
  if (!choices.is_array()) fail(fmt::format("\"choices\" is {}, not an array of strings", json_kind(choices)));
  if (choices.empty()) fail("\"choices\" is empty: an item needs at least one choice");
  if (!answer.is_number_integer()) fail(fmt::format("\"answer\" is {}, not an integer index", json_kind(answer)));
  const auto n_choices = static_cast<std::int64_t>(choices.size());
  // Read as int64 whether nlohmann holds it signed or unsigned; past int64 it is out of range anyway.
  const std::int64_t index = answer.is_number_unsigned() && answer.get<std::uint64_t>() > INT64_MAX
                                 ? INT64_MAX
                                 : answer.get<std::int64_t>();
  if (index < 0 || index >= n_choices)
    fail(fmt::format("\"answer\" is {}, out of range for {} choice{} (0 to {})", index, n_choices,
                     n_choices == 1 ? "" : "s", n_choices - 1));
  TaskItem item;
  item.answer = index;
  item.context = tokenizer.encode(context.get<std::string>());
  if (item.context.empty()) fail("\"context\" is empty: the first choice token needs something to follow");
  for (std::int64_t c = 0; c < n_choices; ++c) {
    const Json& choice = choices[static_cast<std::size_t>(c)];
    if (!choice.is_string()) fail(fmt::format("choice {} is {}, not a string", c, json_kind(choice)));
    const std::string text = choice.get<std::string>();
    std::vector<std::int32_t> ids = tokenizer.encode(text);
    if (ids.empty()) fail(fmt::format("choice {} is empty", c));
    // A row holds seq_len inputs: the choice and at least one context token before it.
    if (static_cast<std::int64_t>(ids.size()) > seq_len)
      fail(fmt::format("choice {} is {} tokens, more than the model's sequence length of {} leaves for any context",
                       c, ids.size(), seq_len));
    item.choices.push_back(std::move(ids));
    item.choice_bytes.push_back(static_cast<std::int64_t>(text.size()));
  }
  return item;
}

bool blank(std::string_view line) { return line.find_first_not_of(" \t\r") == std::string_view::npos; }

}  // namespace

ScoringTask load_task(const std::string& path, const Tokenizer& tokenizer, std::int64_t seq_len) {
  ScoringTask task;
  task.path = path;
  task.name = std::filesystem::path(path).stem().string();
  const std::string text = read_regular_file(path);
  std::int64_t line_no = 0;
  for (std::size_t begin = 0; begin < text.size();) {
    std::size_t end = text.find('\n', begin);
    if (end == std::string::npos) end = text.size();
    const std::string_view line(text.data() + begin, end - begin);
    begin = end + 1;
    ++line_no;
    if (blank(line)) continue;
    const auto fail = [&](const std::string& what) { bad_line(path, line_no, what); };
    Json j;
    try {
      j = parse_json(line, fmt::format("task file {} line {}", path, line_no));
    } catch (const Json::exception&) {
      fail("not valid JSON");
    }
    TaskItem item = parse_item(j, tokenizer, seq_len, fail);
    for (const auto& choice : item.choices)
      if (static_cast<std::int64_t>(item.context.size() + choice.size()) > seq_len + 1) {
        ++task.truncated;
        break;
      }
    task.items.push_back(std::move(item));
  }
  if (task.items.empty())
    throw UserError(fmt::format("task file {} holds no items; each line must be one item like {}", path, kItemForm));
  return task;
}

}  // namespace ustrain
