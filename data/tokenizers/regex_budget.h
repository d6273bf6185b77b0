// The CPU time that the pre-tokenizer regex searches of one document may take together.
//
// One budget per document, shared by every search of its pieces, so that a pattern that is
// slow on each piece (or that rescans the text at every position) stops at one bound for the
// whole document rather than one per search. The budget grows with the document but has a
// hard cap. The time counts from the first clock check of the document (the encoding between
// searches included, which is small next to a search that runs away), read every few match
// attempts: reading the thread's CPU clock is a system call, too slow to make per search.
#pragma once

#include <cstddef>

namespace ustrain {

struct RegexLimits {
  // CPU seconds for a document: a base plus a share per MiB of text, at most the cap. Real
  // pre-tokenizer patterns split tens of MiB per second.
  double cpu_seconds = 10;
  double cpu_seconds_per_mib = 2;
  double max_cpu_seconds = 60;
};

// Used by one thread: a document is encoded on one.
class RegexBudget {
 public:
  explicit RegexBudget(std::size_t document_bytes, const RegexLimits& limits = {});
  // Called at each match attempt; false once the document has spent its budget.
  bool attempt();
  double seconds() const { return seconds_; }

 private:
  double seconds_;
  double started_ = -1;  // the thread's CPU time at the first clock check
  unsigned attempts_ = 0;
};

}  // namespace ustrain
