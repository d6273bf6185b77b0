// Fault injection for the crash-safety tests. With USTRAIN_TEST_KILL_AT=POINT or POINT:N in
// the environment, the process sends itself SIGKILL the Nth time (default: the first) a save
// reaches POINT; without it, nothing happens. The points, in the order a save passes them:
//   stage            the temporary directory step-N.tmp exists, no file in it yet
//   rank-file-half   half of this rank's tensor bytes are written
//   rank-file        the rank file is written and fsynced
//   manifest         manifest.json is written into the temporary directory
//   publish          step-N.tmp was renamed to step-N; `latest` still names the previous one
//   latest           `latest` names step-N
//   retention        an old checkpoint was renamed for deletion but not yet deleted
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace ustrain {

class SaveFaults {
 public:
  SaveFaults() = default;  // never fires
  static SaveFaults from_environment();

  // Called by the saving thread at each point; kills the process when the point is due.
  void reached(std::string_view point);

 private:
  std::string point_;
  std::int64_t due_ = 0;
  std::int64_t seen_ = 0;
};

}  // namespace ustrain
