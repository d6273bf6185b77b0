#include "data/tokenizers/text_normalizer.h"

#include <unicode/bytestream.h>
#include <unicode/normalizer2.h>

#include <algorithm>

#include <fmt/format.h>

#include "kernels/error.h"

namespace ustrain {
namespace {

void replace_all(std::string& text, const std::string& what, const std::string& with) {
  if (what.empty()) return;
  std::string out;
  std::size_t from = 0;
  for (std::size_t at; (at = text.find(what, from)) != std::string::npos; from = at + what.size()) {
    out.append(text, from, at - from);
    out += with;
  }
  if (from == 0) return;
  out.append(text, from);
  text = std::move(out);
}

}  // namespace

std::string nfc(std::string_view text) {
  // Text below U+0300 (ASCII and Latin-1 letters) is already in NFC: no combining marks.
  if (std::all_of(text.begin(), text.end(), [](char c) { return static_cast<unsigned char>(c) < 0xCC; }))
    return std::string(text);
  UErrorCode status = U_ZERO_ERROR;
  const icu::Normalizer2* normalizer = icu::Normalizer2::getNFCInstance(status);
  if (U_FAILURE(status)) throw UserError(fmt::format("ICU has no NFC normalizer ({})", u_errorName(status)));
  const icu::StringPiece piece(text.data(), static_cast<std::int32_t>(text.size()));
  if (normalizer->isNormalizedUTF8(piece, status) && U_SUCCESS(status)) return std::string(text);
  status = U_ZERO_ERROR;
  std::string out;
  icu::StringByteSink<std::string> sink(&out, static_cast<std::int32_t>(text.size()));
  normalizer->normalizeUTF8(0, piece, sink, nullptr, status);
  if (U_FAILURE(status)) throw UserError(fmt::format("ICU could not put text into NFC ({})", u_errorName(status)));
  return out;
}

TextNormalizer::TextNormalizer(std::vector<NormalizerStep> steps) : steps_(std::move(steps)) {}

std::string TextNormalizer::normalize(std::string_view text) const {
  std::string out(text);
  for (const NormalizerStep& step : steps_) {
    switch (step.kind) {
      case NormalizerStep::Kind::nfc:
        out = nfc(out);
        break;
      case NormalizerStep::Kind::prepend:
        if (!out.empty()) out.insert(0, step.text);
        break;
      case NormalizerStep::Kind::replace:
        replace_all(out, step.text, step.replacement);
        break;
    }
  }
  return out;
}

}  // namespace ustrain
