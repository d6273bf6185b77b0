// UTF-8 helpers for the tokenizers: code points in and out, validity, and repair.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace ustrain {

std::string utf8_of(char32_t code_point);
// The code point at `at` in valid UTF-8, advancing `at` past it.
char32_t next_code_point(std::string_view text, std::size_t& at);
// The length of the valid UTF-8 sequence at `at`, or 0 when the bytes there are not one.
std::size_t valid_sequence_length(std::string_view text, std::size_t at);
bool is_valid_utf8(std::string_view text);
// `text` with each maximal invalid subsequence replaced by U+FFFD, as Python's
// bytes.decode(errors="replace") and Rust's String::from_utf8_lossy do.
std::string repair_utf8(std::string_view text);

}  // namespace ustrain
