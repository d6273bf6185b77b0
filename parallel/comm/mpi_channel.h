// The channels an MPI communicator's operations are counted on (mpi_engine.h), so that an
// overdue one can ask a peer whether it has issued the operation it waits for. Internal to
// parallel/.
#pragma once

#include <compare>
#include <cstdint>

namespace ustrain::mpi_detail {

// Which of a peer's operations an operation waits for. Collectives on a communicator meet in
// the order each member issues them; a send meets the receive MPI matches it with: the n-th
// send from A to B with a tag meets the n-th receive at B from A with that tag, whatever else
// either rank issued in between (a pipeline stage issues its sends and receives in its own
// order). So operations are counted per channel, and the n-th of a channel on one rank waits
// for the n-th of its counterpart on the other.
struct Channel {
  enum Kind : std::int32_t { collective = 0, send = 1, receive = 2 };
  Kind kind = collective;
  int peer = -1;  // a send's or receive's peer, a global rank
  int tag = 0;
  auto operator<=>(const Channel&) const = default;
  bool point_to_point() const { return kind != collective; }
  // The channel of the operations that meet this one on its peer, as that rank counts them:
  // `global_rank` is this rank.
  Channel counterpart(int global_rank) const {
    if (kind == collective) return *this;
    return Channel{kind == send ? receive : send, global_rank, tag};
  }
};

}  // namespace ustrain::mpi_detail
