// ustrain_ring_balance_bench: how evenly the zig-zag split shares attention work among the cp
// ranks under document masking (not a test). Windows of --seq tokens are packed with documents
// (geometric lengths of --doc-mean tokens, or the lengths listed in --doc-lengths FILE, one per
// line, in order), and for each cp every rank's ring schedule (parallel/ring_attention.h) is
// counted: the (query, key) pairs the mask allows in its blocks, the score entries the CPU
// kernel's query tiles compute, and the blocks it runs; each as the busiest rank's share
// against the mean rank's (1.000 = perfectly even), with the extremes, and every rank's share.
//
//   ustrain_ring_balance_bench [--seq S] [--windows N] [--doc-mean N] [--doc-lengths FILE] [--window W]
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "kernels/block_mask_rows.h"
#include "kernels/cpu/bench/packed_documents.h"
#include "parallel/ring_attention.h"

namespace {

using namespace ustrain;

struct Options {
  std::int64_t seq = 2048, windows = 256, doc_mean = 256, window = 0;
  std::string doc_lengths;
};

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (i + 1 >= argc) {
      fmt::print(stderr, "{} needs a value; see the usage at the top of ring_balance_bench.cpp\n", a);
      std::exit(2);
    }
    const std::string v = argv[++i];
    if (a == "--seq") o.seq = std::atoll(v.c_str());
    else if (a == "--windows") o.windows = std::atoll(v.c_str());
    else if (a == "--doc-mean") o.doc_mean = std::atoll(v.c_str());
    else if (a == "--doc-lengths") o.doc_lengths = v;
    else if (a == "--window") o.window = std::atoll(v.c_str());
    else {
      fmt::print(stderr, "unknown option {}; see the usage at the top of ring_balance_bench.cpp\n", a);
      std::exit(2);
    }
  }
  return o;
}

struct RankWork {
  std::int64_t pairs = 0, entries = 0, blocks = 0;
};

// One rank's work over every window (each window one sequence of the batch).
RankWork rank_work(int rank, int cp, const AttentionMask& mask, const HostDocuments& docs, std::int64_t windows,
                   std::int64_t seq) {
  RankWork w;
  for (const RingBlock& b : ring_schedule(rank, cp, seq / cp, mask, docs)) {
    const BlockMaskRows rows(b.mask, windows, b.q.count, b.k.count);
    for (std::int64_t s = 0; s < windows; ++s)
      for (std::int64_t r = 0; r < b.q.count; ++r) w.pairs += rows.keys(s, r).size();
    w.entries += rows.tiled_entries(kAttentionQueryTile);
    ++w.blocks;
  }
  return w;
}

// "max / mean (min .. max)" of one measure over the ranks.
std::string spread(const std::vector<RankWork>& ranks, std::int64_t RankWork::*field) {
  std::int64_t low = ranks[0].*field, high = low, sum = 0;
  for (const RankWork& w : ranks) {
    low = std::min(low, w.*field);
    high = std::max(high, w.*field);
    sum += w.*field;
  }
  const double mean = double(sum) / double(ranks.size());
  return fmt::format("{:.3f} ({:.4g} .. {:.4g})", double(high) / mean, double(low), double(high));
}

// Each rank's allowed pairs against the mean rank's, in rank order.
std::string shares(const std::vector<RankWork>& ranks) {
  double sum = 0;
  for (const RankWork& w : ranks) sum += double(w.pairs);
  std::string s;
  for (const RankWork& w : ranks) s += fmt::format(" {:.3f}", double(w.pairs) * double(ranks.size()) / sum);
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  try {
    bench::DocumentLengths lengths = o.doc_lengths.empty() ? bench::DocumentLengths(double(o.doc_mean), 11)
                                                           : bench::DocumentLengths(o.doc_lengths);
    std::vector<std::int32_t> ids = bench::packed_windows(lengths, o.windows, o.seq);
    std::int64_t documents = o.windows;
    for (std::size_t i = 1; i < ids.size(); ++i) documents += ids[i] > ids[i - 1] ? 1 : 0;
    fmt::print("{} windows of {} tokens, {} document pieces (mean {:.0f} tokens, {}){}\n", o.windows, o.seq, documents,
               double(o.windows * o.seq) / double(documents), lengths.listed() ? o.doc_lengths : "geometric",
               o.window > 0 ? fmt::format(", window {}", o.window) : "");
    AttentionMask mask = AttentionMask::causal();
    mask.window = o.window;
    mask.q_documents = mask.k_documents = Tensor(ids.data(), Shape{o.windows, o.seq}, DType::i32);
    const HostDocuments docs{ids, ids, o.windows};
    fmt::print("{:>3}  {:<34} {:<34} {}\n", "cp", "allowed pairs: max/mean (min..max)", "tile entries: max/mean",
               "blocks: max/mean");
    for (int cp : {2, 4, 8}) {
      std::vector<RankWork> ranks;
      for (int r = 0; r < cp; ++r) ranks.push_back(rank_work(r, cp, mask, docs, o.windows, o.seq));
      fmt::print("{:>3}  {:<34} {:<34} {}\n", cp, spread(ranks, &RankWork::pairs), spread(ranks, &RankWork::entries),
                 spread(ranks, &RankWork::blocks));
      fmt::print("     allowed pairs of each rank / the mean:{}\n", shares(ranks));
    }
  } catch (const std::exception& e) {
    fmt::print(stderr, "{}\n", e.what());
    return 2;
  }
  return 0;
}
