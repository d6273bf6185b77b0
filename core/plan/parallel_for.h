// Work spread over threads: the planner's layouts are independent of one another, so each
// thread takes the next one until none is left.
#pragma once

#include <cstddef>
#include <functional>

namespace ustrain {

// Runs `work(i)` for every i in [0, count) on up to `threads` threads (0: one per core), and
// `done(n)` after each, n counting those finished so far (calls to `done` never overlap). The
// first exception `work` throws stops the others from starting more and is rethrown here.
void parallel_for(std::size_t count, int threads, const std::function<void(std::size_t)>& work,
                  const std::function<void(std::size_t)>& done);

}  // namespace ustrain
