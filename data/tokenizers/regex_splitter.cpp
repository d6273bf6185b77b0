#include "data/tokenizers/regex_splitter.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <algorithm>
#include <cstdint>
#include <memory>

#include <fmt/format.h>

namespace ustrain {
namespace {

constexpr std::uint32_t kMatchLimit = 10'000'000;  // PCRE2's default, for short texts
// A run of n spaces takes about n backtracking steps with the tokenizers' \s+(?!\S).
constexpr std::uint32_t kMatchLimitPerByte = 4;
constexpr std::uint32_t kHeapLimitKib = 256 << 10;  // the interpreter's backtracking frames
constexpr std::size_t kJitStackStart = 32 << 10, kJitStackMax = 64 << 20;
// Before the pattern (after its leading (*VERB) options): called at each match attempt.
constexpr std::string_view kAttemptCallout = "(?C1)";

// Where kAttemptCallout goes: after the (*UTF), (*LIMIT_MATCH=n), ... that must lead.
std::size_t after_leading_options(const std::string& pattern) {
  std::size_t at = 0;
  while (pattern.compare(at, 2, "(*") == 0) {
    const std::size_t close = pattern.find(')', at);
    if (close == std::string::npos) break;
    at = close + 1;
  }
  return at;
}

// Called at each match attempt; an error ends the search.
int check_budget(pcre2_callout_block*, void* budget) {
  return static_cast<RegexBudget*>(budget)->attempt() ? 0 : PCRE2_ERROR_CALLOUT;
}

std::uint32_t match_limit_for(std::size_t bytes) {
  const std::uint64_t limit = kMatchLimit + std::uint64_t{kMatchLimitPerByte} * bytes;
  return static_cast<std::uint32_t>(std::min<std::uint64_t>(limit, UINT32_MAX));
}

// What ran out, in words; empty for an error that is no bound.
std::string bound_hit(int code, const RegexBudget& budget) {
  switch (code) {
    case PCRE2_ERROR_MATCHLIMIT: return "its backtracking steps passed the match limit";
    case PCRE2_ERROR_DEPTHLIMIT: return "its backtracking passed the depth limit";
    case PCRE2_ERROR_HEAPLIMIT: return fmt::format("it needed more than {} MiB of backtracking memory", kHeapLimitKib >> 10);
    case PCRE2_ERROR_JIT_STACKLIMIT: return fmt::format("it needed more than {} MiB of JIT stack", kJitStackMax >> 20);
    case PCRE2_ERROR_CALLOUT:
      return fmt::format("the searches of the document took longer than its CPU time limit of {:.3g} s", budget.seconds());
    default: return "";
  }
}

// The bounds of one search, made for each call so that threads share nothing but the
// document's budget.
struct Search {
  std::unique_ptr<pcre2_match_data, void (*)(pcre2_match_data*)> match{nullptr, &pcre2_match_data_free};
  std::unique_ptr<pcre2_match_context, void (*)(pcre2_match_context*)> context{nullptr, &pcre2_match_context_free};
  std::unique_ptr<pcre2_jit_stack, void (*)(pcre2_jit_stack*)> jit_stack{nullptr, &pcre2_jit_stack_free};

  Search(const pcre2_code* code, std::size_t bytes, RegexBudget& budget) {
    match.reset(pcre2_match_data_create_from_pattern(code, nullptr));
    context.reset(pcre2_match_context_create(nullptr));
    if (!match || !context) throw std::bad_alloc();
    pcre2_set_match_limit(context.get(), match_limit_for(bytes));
    pcre2_set_depth_limit(context.get(), match_limit_for(bytes));
    pcre2_set_heap_limit(context.get(), kHeapLimitKib);
    pcre2_set_callout(context.get(), &check_budget, &budget);
  }

  // The JIT's own stack (32 KiB on the machine stack) runs out on long runs: a larger one,
  // made only then.
  bool grow_jit_stack() {
    if (jit_stack) return false;
    jit_stack.reset(pcre2_jit_stack_create(kJitStackStart, kJitStackMax, nullptr));
    if (!jit_stack) throw std::bad_alloc();
    pcre2_jit_stack_assign(context.get(), nullptr, jit_stack.get());
    return true;
  }
};

}  // namespace

RegexSplitter::RegexSplitter(const std::string& pattern, const std::string& where)
    : pattern_(pattern), where_(where) {
  std::string timed = pattern;
  const std::size_t callout_at = after_leading_options(pattern);
  timed.insert(callout_at, kAttemptCallout);
  int error = 0;
  PCRE2_SIZE offset = 0;
  code_ = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(timed.data()), timed.size(), PCRE2_UTF | PCRE2_UCP, &error,
                        &offset, nullptr);
  if (code_ == nullptr) {
    PCRE2_UCHAR message[256];
    pcre2_get_error_message(error, message, sizeof message);
    if (offset >= callout_at + kAttemptCallout.size()) offset -= kAttemptCallout.size();  // in the user's pattern
    throw UserError(fmt::format("{}: the regex {} does not compile ({} at offset {})", where, abbreviate(pattern),
                                reinterpret_cast<const char*>(message), offset));
  }
  pcre2_jit_compile(code_, PCRE2_JIT_COMPLETE);  // where JIT is unavailable, pcre2_match interprets
}

RegexSplitter::~RegexSplitter() { pcre2_code_free(code_); }

void RegexSplitter::split(std::string_view text, std::vector<std::string_view>& out, RegexBudget& budget) const {
  std::vector<std::pair<std::string_view, bool>> found;
  find(text, found, budget);
  for (const auto& [piece, is_match] : found) out.push_back(piece);
}

void RegexSplitter::find(std::string_view text, std::vector<std::pair<std::string_view, bool>>& out,
                         RegexBudget& budget) const {
  if (text.empty()) return;
  Search search(code_, text.size(), budget);
  const auto subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  std::size_t gap = 0, at = 0;  // the unmatched stretch starts at gap; the next search at at
  while (at < text.size()) {
    int found = pcre2_match(code_, subject, text.size(), at, PCRE2_NO_UTF_CHECK, search.match.get(),
                            search.context.get());
    if (found == PCRE2_ERROR_JIT_STACKLIMIT && search.grow_jit_stack()) continue;
    if (found == PCRE2_ERROR_NOMATCH) break;
    if (found < 0) {
      if (const std::string bound = bound_hit(found, budget); !bound.empty())
        throw RegexLimitError(fmt::format("the pre-tokenizer regex of {} gave up on the text after {} of its {} "
                                          "bytes: {} (the regex {}); no text a tokenizer should meet needs that, so "
                                          "leave the document out, or use a tokenizer whose regex does not "
                                          "backtrack so",
                                          where_, at, text.size(), bound, abbreviate(pattern_)));
      PCRE2_UCHAR message[256];
      pcre2_get_error_message(found, message, sizeof message);
      throw UserError(fmt::format("pre-tokenizer regex failed on the text ({})", reinterpret_cast<const char*>(message)));
    }
    const PCRE2_SIZE* bounds = pcre2_get_ovector_pointer(search.match.get());
    const std::size_t begin = bounds[0], end = bounds[1];
    if (end == begin) {  // an empty match: step over one character, which stays in the gap
      at = begin + 1;
      while (at < text.size() && (static_cast<unsigned char>(text[at]) & 0xC0) == 0x80) ++at;
      continue;
    }
    if (begin > gap) out.emplace_back(text.substr(gap, begin - gap), false);
    out.emplace_back(text.substr(begin, end - begin), true);
    gap = at = end;
  }
  if (gap < text.size()) out.emplace_back(text.substr(gap), false);
}

}  // namespace ustrain
