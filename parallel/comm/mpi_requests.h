// Testing and cancelling the nonblocking requests of one operation of the MPI progress
// engine (mpi_engine.h). Internal to parallel/ (includes mpi.h); progress thread only.
#pragma once

#include <mpi.h>

#include <vector>

namespace ustrain::mpi_detail {

// MPI_Testall, with the failing request's own error code instead of MPI_ERR_IN_STATUS.
int test_all(std::vector<MPI_Request>& requests, int& done);

// Cancels the requests of a send or receive that will not be waited for again, so that MPI
// never writes into (or reads from) its buffer once the caller has given it up. Cancelling a
// receive that has not matched is local and completes at once; one already matched, or a
// send, gets a short while to finish, and is then freed (the engine then falls silent, so
// MPI moves none of its data any more). Collectives cannot be cancelled.
void cancel_requests(std::vector<MPI_Request>& requests);

}  // namespace ustrain::mpi_detail
