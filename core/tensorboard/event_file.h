// A TensorBoard event file: TFRecord-framed Event messages (core/tensorboard/event.proto)
// that `tensorboard --logdir DIR` reads from every events.out.tfevents.* file of DIR in name
// order.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ustrain {

class EventFile {
 public:
  // Creates a new file `dir`/events.out.tfevents.<unix seconds>.<hostname> (TensorBoard's
  // naming; a numeric suffix is added if a run started in the same second took that name: an
  // existing file is never written to), and writes the file_version event "brain.Event:2" and a
  // SessionLog START at `first_step`, the step training starts or resumes with. Throws
  // UserError naming the file if it cannot be created.
  EventFile(const std::string& dir, std::int64_t first_step);
  ~EventFile();
  EventFile(const EventFile&) = delete;
  EventFile& operator=(const EventFile&) = delete;

  // Appends one event at `step` holding a float32 scalar (TensorBoard's simple_value) per
  // (tag, value). Each event goes to the file at once, unbuffered, so a viewer sees it and a
  // crash loses nothing already written. Throws UserError if the write fails.
  void write_scalars(std::int64_t step, double wall_time,
                     const std::vector<std::pair<std::string, double>>& scalars);

  const std::string& path() const { return path_; }

 private:
  void append(const std::string& serialized_event);

  std::string path_;
  int fd_ = -1;
};

// Whether `file_name` (no directory) is one of the event files EventFile writes.
bool is_event_file_name(std::string_view file_name);

// Removes every event file from `dir` (a run that starts afresh); nothing if `dir` is absent.
// Throws UserError naming a file that cannot be removed.
void remove_event_files(const std::string& dir);

}  // namespace ustrain
