// The command line of every psflow binary: absl's flags, with a --help a user can read.
//
// --help (and --helpshort) list the flags defined in psflow's own source files, each with its
// default, grouped by the file that defines them and named by its path in the repository
// ("Flags from worker/main.cc:"; the cluster flags shared by psflow-ps and psflow-worker come
// from core/task_flags.cc). absl's own flags (--flagfile, --fromenv, --tryfromenv, --undefok)
// appear only under --helpfull. --version prints "psflow <version>". As absl has it, --help and
// --helpfull exit with status 1, --version with 0; a flag absl cannot parse ends the process
// with its error and status 1.
#ifndef PSFLOW_CORE_COMMAND_LINE_H_
#define PSFLOW_CORE_COMMAND_LINE_H_

#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace psflow {

// Sets the usage message (printed after "<program>: " at the top of --help) and the help
// configuration above, then parses argv into the flags. Returns argv[0] followed by the
// positional arguments. Call once, at the start of main, before any thread reads a flag.
std::vector<char*> ParseFlags(int argc, char** argv, absl::string_view usage);

// The path of `file` (as the compiler named a psflow source file, e.g. in __FILE__) relative to
// the repository; other files (absl's) without a leading "/" or "./". What --help shows.
std::string RepositoryPath(absl::string_view file);

}  // namespace psflow

#endif  // PSFLOW_CORE_COMMAND_LINE_H_
