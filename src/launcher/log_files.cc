#include "launcher/log_files.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstdlib>
#include <filesystem>

#include "net/socket.h"

namespace lockstep::launcher {
namespace {

// mkdir -p.
void make_directories(const std::string& path) {
  for (size_t slash = path.find('/', 1);; slash = path.find('/', slash + 1)) {
    std::string prefix = path.substr(0, slash);
    if (!prefix.empty() && ::mkdir(prefix.c_str(), 0755) != 0 && errno != EEXIST)
      throw Error(detail::concat("cannot create log directory ", prefix, ": ",
                                 net::errno_text(errno), "; check --log-dir"));
    if (slash == std::string::npos) return;
  }
}

// A new directory under $TMPDIR (or /tmp).
std::string make_temp_directory(const char* why) {
  const char* tmp = std::getenv("TMPDIR");
  std::string pattern = std::string(tmp && *tmp ? tmp : "/tmp") + "/lockstep-run-XXXXXX";
  if (!::mkdtemp(pattern.data()))
    throw Error(detail::concat("cannot create ", why, " ", pattern, ": ", net::errno_text(errno),
                               "; give one with --log-dir"));
  return pattern;
}

}  // namespace

std::string prepare_log_root(const LaunchOptions& options) {
  if (!options.log_dir.empty()) {
    make_directories(options.log_dir);
    return options.log_dir;
  }
  if (!options.tee.any() && !options.redirects.any()) return "";
  return make_temp_directory("a log directory");
}

ScratchDir::~ScratchDir() {
  std::error_code ignored;
  if (!path_.empty() && !kept_) std::filesystem::remove_all(path_, ignored);
}

const std::string& ScratchDir::path() {
  if (path_.empty()) path_ = make_temp_directory("a directory for the ranks' error files");
  return path_;
}

std::string attempt_log_dir(const std::string& root, int attempt) {
  if (root.empty()) return "";
  std::string dir = root + "/attempt_" + std::to_string(attempt);
  make_directories(dir);
  return dir;
}

std::vector<OutputRoute> output_routes(const LaunchOptions& options, bool with_files) {
  bool selective = options.tee.any() || options.redirects.any();
  std::vector<OutputRoute> routes;
  for (int local = 0; local < options.nproc_per_node; ++local) {
    Streams redirected = options.redirects.for_local_rank(local);
    Streams teed = options.tee.for_local_rank(local);
    bool shown = options.local_ranks_filter.empty() || options.local_ranks_filter.count(local);
    routes.push_back(OutputRoute{
        .out_to_console = shown && !covers_out(redirected),
        .err_to_console = shown && !covers_err(redirected),
        .out_to_file = with_files && (!selective || covers_out(redirected) || covers_out(teed)),
        .err_to_file = with_files && (!selective || covers_err(redirected) || covers_err(teed)),
    });
  }
  return routes;
}

}  // namespace lockstep::launcher
