// A CPU's measured curves (calibration_measure.h), kept per machine so that a run that plans its
// own layout (parallel.layout = "auto") measures them once rather than at every start: one file
// per key (the CPU model, the ranks measuring at once, their threads, the precision and the
// model's shapes) in a cache directory, $XDG_CACHE_HOME/ustrain/cpu_calibration.
#pragma once

#include <functional>
#include <string>

#include "core/plan/calibration.h"

namespace ustrain {

// Where the curves are kept; empty when neither XDG_CACHE_HOME nor HOME is set.
std::string kept_calibration_dir();

// The curves kept in `dir` under `key`; when there are none (or the file is unusable), those
// `measure` returns, then kept there. A directory that cannot be written is said in the
// curves' source, and the measured curves are used all the same.
Calibration kept_calibration(const std::string& dir, const std::string& key,
                             const std::function<Calibration()>& measure);

}  // namespace ustrain
