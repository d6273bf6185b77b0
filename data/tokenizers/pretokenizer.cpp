#include "data/tokenizers/pretokenizer.h"

#include <algorithm>

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

// A Split step on one piece, as NormalizedString::split of the tokenizers library folds the
// stretches the pattern finds (matches and the text between them).
void split_by_behavior(const Piece& piece, const PreTokenizerStep& step, std::vector<Piece>& out,
                       RegexBudget& budget) {
  std::vector<std::pair<std::string_view, bool>> found;
  step.regex->find(piece.text, found, budget);
  using Behavior = PreTokenizerStep::Behavior;
  std::vector<std::string_view> parts;
  bool previous_match = false;
  const auto extend_last = [&](std::string_view next) {  // next follows the last part in the text
    parts.back() = std::string_view(parts.back().data(), next.data() + next.size() - parts.back().data());
  };
  if (step.behavior == Behavior::merged_with_next) std::reverse(found.begin(), found.end());
  for (auto [stretch, is_match] : found) {
    is_match = is_match != step.invert;
    switch (step.behavior) {
      case Behavior::isolated:
        parts.push_back(stretch);
        break;
      case Behavior::removed:
        if (!is_match) parts.push_back(stretch);
        break;
      case Behavior::contiguous:
        if (is_match == previous_match && !parts.empty())
          extend_last(stretch);
        else
          parts.push_back(stretch);
        break;
      case Behavior::merged_with_previous:
        if (is_match && !previous_match && !parts.empty())
          extend_last(stretch);
        else
          parts.push_back(stretch);
        break;
      case Behavior::merged_with_next:  // walked backwards: the match joins the part after it
        if (is_match && !previous_match && !parts.empty())
          parts.back() = std::string_view(stretch.data(), parts.back().data() + parts.back().size() - stretch.data());
        else
          parts.push_back(stretch);
        break;
    }
    previous_match = is_match;
  }
  if (step.behavior == Behavior::merged_with_next) std::reverse(parts.begin(), parts.end());
  for (std::string_view part : parts)
    if (!part.empty()) out.push_back({part, piece.at_start && part.data() == piece.text.data()});
}

}  // namespace

PreTokenizer::PreTokenizer(std::vector<PreTokenizerStep> steps) : steps_(std::move(steps)) {}

void PreTokenizer::run(std::vector<Piece>& pieces, std::deque<std::string>& arena, RegexBudget& budget) const {
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
          if (step.kind == PreTokenizerStep::Kind::split &&
              (step.behavior != PreTokenizerStep::Behavior::isolated || step.invert)) {
            split_by_behavior(p, step, next, budget);
            break;
          }
          if (!step.regex) {
            next.push_back(p);
            break;
          }
          parts.clear();
          step.regex->split(p.text, parts, budget);
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
