#include "parallel/comm/comm_trace.h"

#include <memory>
#include <utility>

namespace ustrain {
namespace {

class TracedWork final : public WorkState {
 public:
  TracedWork(Work inner, Tracer& tracer, int lane, const char* operation, Tracer::Clock::time_point posted,
             std::vector<TraceArg> args)
      : inner_(std::move(inner)), tracer_(tracer), lane_(lane), operation_(operation), posted_(posted),
        step_(tracer.step()), args_(std::move(args)) {}
  ~TracedWork() override { close(); }
  TracedWork(const TracedWork&) = delete;
  TracedWork& operator=(const TracedWork&) = delete;

  void wait() override {
    try {
      inner_.wait();
    } catch (...) {
      close();
      throw;
    }
    close();
  }
  bool test() override {
    bool done = false;
    try {
      done = inner_.test();
    } catch (...) {
      close();
      throw;
    }
    if (done) close();
    return done;
  }
  void join_compute() override {
    try {
      inner_.join_compute();
    } catch (...) {
      close();
      throw;
    }
    close();
  }

 private:
  void close() {
    if (closed_) return;
    closed_ = true;
    tracer_.record(lane_, operation_, "comm", posted_, Tracer::Clock::now(), std::move(args_), step_);
    tracer_.release_lane(lane_);
  }

  Work inner_;
  Tracer& tracer_;
  int lane_;
  const char* operation_;
  Tracer::Clock::time_point posted_;
  std::int64_t step_;
  std::vector<TraceArg> args_;
  bool closed_ = false;
};

}  // namespace

Work traced_work(Work work, Tracer& tracer, const std::string& group, const char* operation,
                 Tracer::Clock::time_point posted, std::vector<TraceArg> args) {
  const int lane = tracer.take_lane(group);
  return Work(std::make_shared<TracedWork>(std::move(work), tracer, lane, operation, posted, std::move(args)));
}

}  // namespace ustrain
