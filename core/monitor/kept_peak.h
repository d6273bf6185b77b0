// A CPU's measured peak FLOP/s, kept per machine so that MFU is comparable across runs and
// resumes: one JSON file, $XDG_CACHE_HOME/ustrain/peak_flops.json (else
// $HOME/.cache/ustrain/peak_flops.json), with one entry per CPU model and thread count.
#pragma once

#include <optional>
#include <string>

namespace ustrain {

// Where the peaks are kept; empty when neither XDG_CACHE_HOME nor HOME is set.
std::string kept_peak_path();

// What identifies a measurement: the CPU model (/proc/cpuinfo) and the backend's name, which
// holds its thread count, e.g. "AMD EPYC 9554 64-Core Processor | cpu (8 threads)".
std::string peak_key(const std::string& backend_name);

struct KeptPeak {
  double flops_per_second = 0;
  std::string measured_at;  // UTC, e.g. 2026-11-25T21:10:00Z
};

// The entry for `key` in the file at `path`; nullopt when the file, the entry or a positive
// rate is missing, or the file does not parse (it is then measured again and rewritten).
std::optional<KeptPeak> read_kept_peak(const std::string& path, const std::string& key);

// Adds or replaces `key`'s entry, keeping the others; written to a temporary file and renamed,
// so that ranks measuring at once leave a whole file. Returns why it could not, empty when it
// could.
std::string keep_peak(const std::string& path, const std::string& key, const KeptPeak& peak);

}  // namespace ustrain
