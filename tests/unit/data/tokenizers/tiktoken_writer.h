// tiktoken rank files for tests: "BASE64-TOKEN RANK" lines, written here independently of
// ustrain's reader.
#pragma once

#include <string>
#include <vector>

namespace ustrain::test {

std::string base64(const std::string& bytes);

// Ranks 0-255 the single bytes, then `tokens` in order from rank 256.
std::string rank_file_text(const std::vector<std::string>& tokens);

}  // namespace ustrain::test
