#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include "app/commands.h"

namespace ustrain::app {

void setup_logging(const char* level) {
  // Plain stdout (no colour codes) so Slurm log files read the same as a terminal.
  auto logger = spdlog::stdout_logger_mt("ustrain");
  logger->set_pattern("%Y-%m-%d %H:%M:%S %^%l%$ %v");
  logger->set_level(spdlog::level::from_str(level));
  logger->flush_on(spdlog::level::info);
  spdlog::set_default_logger(logger);
}

}  // namespace ustrain::app
