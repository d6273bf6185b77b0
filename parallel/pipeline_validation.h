// The pipeline validator: checks that a program (parallel/pipeline_schedule.h) is complete,
// that its sends and receives match, and that it cannot deadlock (by replaying it,
// parallel/pipeline_simulation.h), before any rank runs it.
#pragma once

#include <string>

#include "parallel/pipeline_schedule.h"

namespace ustrain {

// The empty string when the program is complete and runs: every action of every (stage,
// micro-batch) appears exactly once on the rank that holds the stage, every send has its
// receive with the same (kind, stage, micro-batch) on the peer and the other way round, every
// receive is posted before the action that uses its data, and replaying the programs with
// non-blocking transfers reaches the end on every rank (no deadlock). Otherwise the first
// problem found.
std::string validate_pipeline_program(const PipelineProgram& program);

}  // namespace ustrain
