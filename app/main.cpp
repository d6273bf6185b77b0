// ustrain: train Llama-style language models from TOML recipes.
// Exit status: 0 success, 2 user error (usage, recipe, input), 1 internal error,
// 3 training stopped by a signal after saving a checkpoint (resume with --resume auto).
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <cstdio>
#include <exception>
#include <string>

#include "app/commands.h"
#include "kernels/error.h"
#ifdef USTRAIN_HAVE_CUDA
#include "kernels/cuda/cuda_device.h"
#endif

namespace {

std::string version_text() {
  std::string s = "ustrain " USTRAIN_VERSION;
#ifdef USTRAIN_HAVE_CUDA
  const int gpus = ustrain::cuda::device_count();
  s += fmt::format(" (CUDA runtime {}, {} GPU{} visible)", ustrain::cuda::runtime_version(),
                   gpus, gpus == 1 ? "" : "s");
#else
  s += " (built without CUDA)";
#endif
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"ustrain: train Llama-style language models from TOML recipes, on one CPU or many GPUs.\n"
               "Exit status: 0 success, 2 user error (usage, recipe, input data), 1 internal error,\n"
               "3 training stopped by SIGTERM/SIGUSR1/SIGINT after saving a checkpoint (resume with --resume auto)."};
  app.set_version_flag("--version", version_text());
  app.require_subcommand(1);
  ustrain::app::add_train_command(app);
  ustrain::app::add_generate_command(app);
  ustrain::app::add_eval_command(app);
  ustrain::app::add_ckpt_command(app);
  ustrain::app::add_data_command(app);
  ustrain::app::add_bench_command(app);
  ustrain::app::add_recipe_command(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return 2;
  } catch (const ustrain::app::ExitStatus& e) {
    std::fflush(stdout);
    return e.code;
  } catch (const ustrain::UserError& e) {
    std::fflush(stdout);
    std::fprintf(stderr, "error: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fflush(stdout);
    std::fprintf(stderr, "internal error: %s\nplease report this with the command line and recipe\n", e.what());
    return 1;
  }
  return 0;
}
