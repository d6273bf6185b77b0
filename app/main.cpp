// ustrain: train Llama-style language models from TOML recipes.
// Exit status: 0 success, 2 user error (usage, recipe, input), 1 internal error,
// 3 training stopped by a signal after saving a checkpoint (resume with --resume auto).
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <cstdio>
#include <exception>
#include <filesystem>
#include <string>
#include <vector>

#include "app/commands.h"
#include "app/subcommand_words.h"
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

// "PATH: Permission denied (cannot create directories); check ..." from a filesystem_error.
std::string describe_filesystem_error(const std::filesystem::filesystem_error& e) {
  std::string what = e.what();  // "filesystem error: OPERATION: MESSAGE [PATH1] [PATH2]"
  const std::string prefix = "filesystem error: ";
  if (what.rfind(prefix, 0) == 0) what = what.substr(prefix.size());
  const std::string message = e.code().message();
  const std::size_t cut = what.find(": " + message);
  const std::string operation = cut == std::string::npos ? std::string() : what.substr(0, cut);
  std::string paths = e.path1().string();
  if (!e.path2().empty()) paths += " -> " + e.path2().string();
  if (paths.empty()) return what;
  return fmt::format("{}: {}{}; check the path and the permissions of its directories", paths, message,
                     operation.empty() ? "" : " (" + operation + ")");
}

}  // namespace

int main(int argc, char** argv) {
  // Says only what recipes are accepted for: core/recipe/recipe.cpp refuses what the build cannot run.
  CLI::App app{"ustrain: train Llama-style language models from TOML recipes, on CPUs or (in a CUDA build)\n"
               "NVIDIA GPUs. Parallelism across processes (mpirun, srun): data (ZeRO 0-3), tensor (with sequence),\n"
               "pipeline, context and expert; a recipe that asks for what this build cannot run is refused, saying why.\n"
               "Exit status: 0 success, 2 user error (usage, recipe, input data), 1 internal error,\n"
               "3 training stopped by SIGTERM/SIGUSR1/SIGINT after saving a checkpoint (resume with --resume auto).",
               "ustrain"};
  app.set_version_flag("--version,-V", version_text());
  app.require_subcommand(1);
  ustrain::app::add_train_command(app);
  ustrain::app::add_generate_command(app);
  ustrain::app::add_eval_command(app);
  ustrain::app::add_ckpt_command(app);
  ustrain::app::add_data_command(app);
  ustrain::app::add_bench_command(app);
  ustrain::app::add_plan_command(app);
  ustrain::app::add_recipe_command(app);
  std::vector<std::string> words(argv + 1, argv + argc);
  const ustrain::app::SubcommandWords checked = ustrain::app::check_subcommand_words(app, words);
  if (checked.error) {
    std::fprintf(stderr, "error: %s\n", checked.error->c_str());
    return 2;
  }
  // CLI11 echoes the words it cannot take ("The following argument was not expected: ..."):
  // a word of a megabyte is shortened there as in every other message.
  app.failure_message([&checked](const CLI::App* failed, const CLI::Error& e) {
    std::string message = CLI::FailureMessage::simple(failed, e);
    for (const std::string& word : checked.args) {
      const std::string shown = ustrain::abbreviate(word);
      if (shown == word) continue;
      for (std::size_t at = message.find(word); at != std::string::npos; at = message.find(word, at + shown.size()))
        message.replace(at, word.size(), shown);
    }
    return message;
  });
  std::vector<char*> args{argv[0]};
  for (const std::string& word : checked.args) args.push_back(const_cast<char*>(word.c_str()));
  try {
    app.parse(static_cast<int>(args.size()), args.data());
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
  } catch (const std::filesystem::filesystem_error& e) {
    // A path the user named, or one made from it, that the system refuses (no permission, a
    // name too long, a file where a directory belongs): the user's to fix.
    std::fflush(stdout);
    std::fprintf(stderr, "error: %s\n", describe_filesystem_error(e).c_str());
    return 2;
  } catch (const std::exception& e) {
    std::fflush(stdout);
    std::fprintf(stderr, "internal error: %s\nplease report this with the command line and recipe\n", e.what());
    return 1;
  }
  return 0;
}
