#include "data/tokenizers/token_decoder.h"

#include "data/tokenizers/utf8.h"

namespace ustrain {
namespace {

std::string replaced(const std::string& text, const std::string& what, const std::string& with) {
  if (what.empty()) return text;
  std::string out;
  std::size_t from = 0;
  for (std::size_t at; (at = text.find(what, from)) != std::string::npos; from = at + what.size()) {
    out.append(text, from, at - from);
    out += with;
  }
  return out.append(text, from);
}

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

// "<0x41>" -> 0x41; -1 for other tokens.
int byte_token(const std::string& token) {
  if (token.size() != 6 || !token.starts_with("<0x") || token[5] != '>') return -1;
  const int hi = hex_digit(token[3]), lo = hex_digit(token[4]);
  return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
}

std::vector<std::string> byte_fallback(std::vector<std::string> tokens) {
  std::vector<std::string> out;
  std::string bytes;
  const auto flush = [&] {
    if (bytes.empty()) return;
    if (is_valid_utf8(bytes)) {
      out.push_back(bytes);
    } else {
      for (std::size_t i = 0; i < bytes.size(); ++i) out.push_back("\xEF\xBF\xBD");  // one U+FFFD per byte
    }
    bytes.clear();
  };
  for (std::string& token : tokens) {
    const int b = byte_token(token);
    if (b >= 0) {
      bytes.push_back(static_cast<char>(b));
      continue;
    }
    flush();
    out.push_back(std::move(token));
  }
  flush();
  return out;
}

// Up to `start` leading and `stop` trailing copies of the character `c` removed.
std::string stripped(const std::string& token, const std::string& c, int start, int stop) {
  std::size_t begin = 0, end = token.size();
  for (int i = 0; i < start && token.compare(begin, c.size(), c) == 0 && begin + c.size() <= end; ++i) begin += c.size();
  for (int i = 0; i < stop && end >= begin + c.size() && token.compare(end - c.size(), c.size(), c) == 0; ++i)
    end -= c.size();
  return token.substr(begin, end - begin);
}

}  // namespace

TokenDecoder::TokenDecoder(std::vector<DecoderStep> steps) : steps_(std::move(steps)) {}

std::string TokenDecoder::decode(std::vector<std::string> tokens) const {
  if (steps_.empty()) {
    std::string joined;
    for (std::size_t i = 0; i < tokens.size(); ++i) joined += (i ? " " : "") + tokens[i];
    return joined;
  }
  for (const DecoderStep& step : steps_) {
    switch (step.kind) {
      case DecoderStep::Kind::byte_level: {
        std::string bytes;
        for (const std::string& token : tokens) bytes += alphabet_.bytes_of(token).value_or(token);
        tokens = {repair_utf8(bytes)};
        break;
      }
      case DecoderStep::Kind::metaspace:
        for (std::size_t i = 0; i < tokens.size(); ++i)
          tokens[i] = replaced(tokens[i], step.text, i == 0 && step.prepend ? "" : " ");
        break;
      case DecoderStep::Kind::byte_fallback:
        tokens = byte_fallback(std::move(tokens));
        break;
      case DecoderStep::Kind::fuse: {
        std::string all;
        for (const std::string& token : tokens) all += token;
        tokens = {all};
        break;
      }
      case DecoderStep::Kind::strip:
        for (std::string& token : tokens) token = stripped(token, step.text, step.start, step.stop);
        break;
      case DecoderStep::Kind::replace:
        for (std::string& token : tokens) token = replaced(token, step.text, step.replacement);
        break;
    }
  }
  std::string text;
  for (const std::string& token : tokens) text += token;
  return text;
}

}  // namespace ustrain
