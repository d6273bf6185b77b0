// What this binary was built from, for the run directory's run.json.
#pragma once

namespace ustrain {

// The project version ("0.1.0").
const char* build_version();
// The git commit the build was configured from, or "unknown" outside a git checkout
// (captured by CMake at configure time; a new commit configures again).
const char* build_git_commit();
// "Release", "Debug", ...
const char* build_type();
// Whether the CUDA backend is built in.
bool build_has_cuda();

}  // namespace ustrain
