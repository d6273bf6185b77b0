// tokenizer.json's normalizers that ustrain applies: NFC (ICU), Prepend and Replace of a
// plain string, in sequence. Others are refused when the file is read (hf_tokenizer_json.h).
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace ustrain {

struct NormalizerStep {
  enum class Kind { nfc, prepend, replace } kind;
  std::string text;         // prepend: what is put before; replace: what is looked for
  std::string replacement;  // replace
};

class TextNormalizer {
 public:
  explicit TextNormalizer(std::vector<NormalizerStep> steps = {});
  bool empty() const { return steps_.empty(); }
  // `text` after every step in order. `text` is valid UTF-8.
  std::string normalize(std::string_view text) const;

 private:
  std::vector<NormalizerStep> steps_;
};

// `text` in Unicode normalisation form C (canonical composition), by ICU.
std::string nfc(std::string_view text);

}  // namespace ustrain
