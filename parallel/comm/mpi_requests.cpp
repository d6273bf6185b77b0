#include "parallel/comm/mpi_requests.h"

#include <chrono>
#include <thread>

namespace ustrain::mpi_detail {

int test_all(std::vector<MPI_Request>& requests, int& done) {
  if (requests.size() == 1) return MPI_Test(requests.data(), &done, MPI_STATUS_IGNORE);  // the common case
  std::vector<MPI_Status> statuses(requests.size());
  const int rc = MPI_Testall(static_cast<int>(requests.size()), requests.data(), &done, statuses.data());
  if (rc == MPI_ERR_IN_STATUS)
    for (const MPI_Status& s : statuses)
      if (s.MPI_ERROR != MPI_SUCCESS && s.MPI_ERROR != MPI_ERR_PENDING) return s.MPI_ERROR;
  return rc;
}

void cancel_requests(std::vector<MPI_Request>& requests) {
  using Clock = std::chrono::steady_clock;
  for (MPI_Request& r : requests) {
    if (r == MPI_REQUEST_NULL) continue;
    MPI_Cancel(&r);
    const Clock::time_point until = Clock::now() + std::chrono::milliseconds(100);
    int done = 0;
    while (MPI_Test(&r, &done, MPI_STATUS_IGNORE) == MPI_SUCCESS && !done && Clock::now() < until)
      std::this_thread::yield();
    if (!done && r != MPI_REQUEST_NULL) MPI_Request_free(&r);
  }
}

}  // namespace ustrain::mpi_detail
