// The parallel encoder hands documents back in order, and holds no more text in flight than
// its budget allows (one batch beyond it), however many workers it has.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "data/convert/parallel_encoder.h"
#include "data/tokenizers/tokenizer.h"

namespace ustrain {
namespace {

TEST(DataParallelEncoder, LongDocumentsInFlightStayWithinTheBudget) {
  const std::unique_ptr<Tokenizer> bytes = open_tokenizer("byte");
  constexpr std::size_t kDocument = 2 << 20, kBudget = 3 << 20;
  std::vector<char> firsts;  // each document's first byte, in the order they come back
  ParallelEncoder encoder(bytes.get(), 4, [&](PendingDocument& d) { firsts.push_back(static_cast<char>(d.ids[0])); },
                          kBudget);
  std::size_t most_in_flight = 0;
  for (int d = 0; d < 12; ++d) {
    PendingDocument document;
    document.text = std::string(kDocument, static_cast<char>('a' + d));
    document.encode = true;
    encoder.add(std::move(document));
    most_in_flight = std::max(most_in_flight, static_cast<std::size_t>(d + 1) - firsts.size());
  }
  encoder.finish();
  // Two documents of 2 MiB pass the 3 MiB budget, so the older one is waited for.
  EXPECT_EQ(most_in_flight, 1u);
  EXPECT_EQ(std::string(firsts.begin(), firsts.end()), "abcdefghijkl");
}

}  // namespace
}  // namespace ustrain
