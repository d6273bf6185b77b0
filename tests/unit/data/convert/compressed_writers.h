// Writers of gzip and zstd data for the tests of compressed inputs, made with zlib and libzstd
// directly, so that the framings other tools write can be built without those tools.
#pragma once

#include <string>

namespace ustrain::test {

// One gzip member holding `text` (zlib's deflate with gzip framing).
std::string gzip_member(const std::string& text);

// One zstd frame holding `text`, its size in the header.
std::string zstd_frame(const std::string& text);

// A zstd skippable frame (magic 0x184D2A50 + variant) carrying `payload`, as pzstd writes.
std::string zstd_skippable_frame(const std::string& payload, unsigned variant = 0);

// One zstd frame written as a stream (no size in its header) with a window of 2^window_log
// bytes, as `zstd --long=31` writes from a pipe.
std::string zstd_stream_frame(const std::string& text, int window_log);

}  // namespace ustrain::test
