#include "data/pretokenizer.h"

namespace ustrain {
namespace {

std::string replace_spaces(std::string_view text, const std::string& replacement) {
  std::string out;
  out.reserve(text.size() + 8);
  for (char c : text) {
    if (c == ' ')
      out += replacement;
    else
      out.push_back(c);
  }
  return out;
}

// Pieces that each begin at an occurrence of `mark` (the text before the first one alone).
void split_before(const Piece& piece, const std::string& mark, std::vector<Piece>& out) {
  std::size_t from = 0;
  for (std::size_t at = piece.text.find(mark, 1); at != std::string_view::npos;
       at = piece.text.find(mark, at + mark.size())) {
    out.push_back({piece.text.substr(from, at - from), piece.at_start && from == 0});
    from = at;
  }
  out.push_back({piece.text.substr(from), piece.at_start && from == 0});
}

}  // namespace

PreTokenizer::PreTokenizer(std::vector<PreTokenizerStep> steps) : steps_(std::move(steps)) {}

void PreTokenizer::run(std::vector<Piece>& pieces, std::deque<std::string>& arena) const {
  std::vector<Piece> next;
  std::vector<std::string_view> parts;
  for (const PreTokenizerStep& step : steps_) {
    next.clear();
    for (const Piece& piece : pieces) {
      if (piece.text.empty()) continue;  // the tokenizers library drops empty pieces
      Piece p = piece;
      switch (step.kind) {
        case PreTokenizerStep::Kind::byte_level:
          if (step.add_prefix_space && !p.text.starts_with(' ')) {
            std::string& spaced = arena.emplace_back(1, ' ');
            spaced.append(p.text);
            p.text = spaced;
          }
          [[fallthrough]];
        case PreTokenizerStep::Kind::split:
          if (!step.regex) {
            next.push_back(p);
            break;
          }
          parts.clear();
          step.regex->split(p.text, parts);
          for (std::size_t i = 0; i < parts.size(); ++i) next.push_back({parts[i], p.at_start && i == 0});
          break;
        case PreTokenizerStep::Kind::metaspace: {
          std::string text = replace_spaces(p.text, step.replacement);
          const bool prepend = step.prepend == PreTokenizerStep::Prepend::always ||
                               (step.prepend == PreTokenizerStep::Prepend::first && p.at_start);
          if (prepend && !text.starts_with(step.replacement)) text.insert(0, step.replacement);
          p.text = arena.emplace_back(std::move(text));
          if (step.split)
            split_before(p, step.replacement, next);
          else
            next.push_back(p);
          break;
        }
      }
    }
    pieces.swap(next);
  }
}

}  // namespace ustrain
