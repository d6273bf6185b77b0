// A pipeline program (parallel/pipeline_schedule.h) drawn as text, from its simulation with
// equal costs (parallel/pipeline_simulation.h).
#pragma once

#include <string>

#include "parallel/pipeline_schedule.h"

namespace ustrain {

// The program as text, one row per rank, one column per time unit of the simulation with
// unit costs: F, B or W and the micro-batch (and /chunk with several chunks) under each
// compute, '.' idle. Above `width` columns a row is cut and ends with "… +N", N the columns
// left out. A legend line explains the notation. For `--dry-run`.
std::string draw_pipeline_timeline(const PipelineProgram& program, int width = 160);

}  // namespace ustrain
