// The bounded JSON parser every JSON input goes through: nesting beyond the limit is refused
// naming the source and the limit, anything else parses as nlohmann::json::parse parses it.
#include <gtest/gtest.h>

#include <string>

#include "data/files/json_input.h"
#include "tests/unit/data/test_support.h"

namespace ustrain {
namespace {

using nlohmann::json;

// `levels` nested arrays (or objects keyed "k") around nothing.
std::string nested(int levels, bool objects = false) {
  std::string text;
  for (int i = 0; i < levels; ++i) text += objects ? "{\"k\": " : "[";
  text += objects ? "0" : "";
  for (int i = 0; i < levels; ++i) text += objects ? "}" : "]";
  return text;
}

const std::string kDeep = nested(200000);
const std::string kLimit = std::to_string(kMaxJsonDepth) + " levels";

TEST(JsonInput, NestingBeyondTheLimitIsRefusedNamingTheSourceAndTheLimit) {
  for (bool objects : {false, true}) {
    test::expect_user_error([&] { parse_json(nested(200000, objects), "deep.json"); }, {"deep.json", kLimit});
    test::expect_user_error([&] { parse_json(nested(kMaxJsonDepth + 1, objects), "one-too-deep.json"); },
                            {"one-too-deep.json", kLimit});
    EXPECT_EQ(parse_json(nested(kMaxJsonDepth, objects), "at-the-limit.json"), json::parse(nested(kMaxJsonDepth, objects)));
  }
  // Depth counts the containers around a value, not the values beside each other.
  std::string siblings = "[";
  for (int i = 0; i < 1000; ++i) siblings += (i ? ", " : "") + nested(kMaxJsonDepth - 1);
  siblings += "]";
  EXPECT_EQ(parse_json(siblings, "siblings.json").size(), 1000u);
}

TEST(JsonInput, ValidDocumentsParseAsTheLibraryParsesThem) {
  const std::string text = R"({"model": {"type": "BPE", "vocab": {"a": 0, "b": 1}, "merges": [["a", "b"]]},
                               "x": [1, -2, 3.5, true, null, "s", {"deeper": [[[{}]]]}], "big": 18446744073709551615})";
  EXPECT_EQ(parse_json(text, "t.json"), json::parse(text));
  EXPECT_EQ(parse_json_or_discarded(text), json::parse(text));
}

TEST(JsonInput, SyntaxErrorsAreLeftToTheCallerToWord) {
  EXPECT_THROW(parse_json("{\"a\": ", "broken.json"), json::parse_error);
  EXPECT_THROW(parse_json("[1e999999]", "huge.json"), json::out_of_range);
}

TEST(JsonInput, TheTolerantFormDiscardsWhatItCannotUse) {
  EXPECT_TRUE(parse_json_or_discarded(kDeep).is_discarded());
  EXPECT_TRUE(parse_json_or_discarded("{\"a\": ").is_discarded());
  EXPECT_EQ(parse_json_or_discarded("{\"a\": 1}")["a"], 1);
}

}  // namespace
}  // namespace ustrain
