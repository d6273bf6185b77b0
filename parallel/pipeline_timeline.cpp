#include "parallel/pipeline_timeline.h"

#include <fmt/format.h>

#include <vector>

#include "parallel/pipeline_simulation.h"

namespace ustrain {

std::string draw_pipeline_timeline(const PipelineProgram& program, int width) {
  const PipelineSimulation sim = simulate_pipeline(program, ActionCosts{});
  const PipelineShape& s = program.shape;
  // One cell per time unit, wide enough for the longest label ("F12/3").
  const int label = 1 + static_cast<int>(std::to_string(s.micro_batches - 1).size()) +
                    (s.chunks > 1 ? 1 + static_cast<int>(std::to_string(s.chunks - 1).size()) : 0);
  const int cell = label + 1;
  const auto units = static_cast<int>(sim.makespan + 0.5);
  std::string out;
  std::size_t cut = 0;  // columns left out of the longest row cut at `width`
  for (int r = 0; r < s.ranks; ++r) {
    std::vector<std::string> cells(static_cast<std::size_t>(units), std::string(static_cast<std::size_t>(label), '.'));
    std::size_t k = 0;
    for (const PipelineAction& a : program.ranks[static_cast<std::size_t>(r)]) {
      if (!is_compute(a.kind)) continue;
      const auto [start, end] = sim.spans[static_cast<std::size_t>(r)][k++];
      const char letter = a.kind == ActionKind::forward ? 'F' : a.kind == ActionKind::backward_weight ? 'W' : 'B';
      std::string text = fmt::format("{}{}", letter, a.micro);
      if (s.chunks > 1) text += fmt::format("/{}", a.chunk);
      text.resize(static_cast<std::size_t>(label), ' ');
      for (int t = static_cast<int>(start + 0.5); t < static_cast<int>(end + 0.5); ++t) cells[static_cast<std::size_t>(t)] = text;
    }
    std::string row = fmt::format("rank {:<2} |", r);
    for (std::size_t t = 0; t < cells.size(); ++t) {
      if (static_cast<int>(row.size()) + cell > width) {
        cut = cells.size() - t;
        row += fmt::format(" \u2026 +{}", cut);
        break;
      }
      row += " " + cells[t];
    }
    out += row + "\n";
  }
  const std::string cell_text = s.chunks > 1 ? fmt::format("F3/1 is micro-batch 3 on the rank's chunk 1 (its stage "
                                                           "chunk * {} + rank)",
                                                           s.ranks)
                                             : std::string("F3 is micro-batch 3");
  out += fmt::format("{} schedule, {} rank(s) x {} chunk(s), {} micro-batches; F forward, {} backward; {}; dots idle; "
                     "one column per unit of time with equal costs{}; bubble {:.3f} of the compute time\n",
                     pipeline_schedule_name(program.schedule), s.ranks, s.chunks, s.micro_batches,
                     program.split_backward ? "B input and W weight" : "B (two units: input and weight)", cell_text,
                     cut > 0 ? "; \u2026 +N: the row goes on for N more columns past the width" : "", sim.bubble);
  return out;
}

}  // namespace ustrain
