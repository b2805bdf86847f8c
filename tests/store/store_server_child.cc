#include "store_server_child.h"

#include <sys/resource.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <optional>
#include <thread>

#include "lockstep/core/error.h"
#include "lockstep/store/tcp_store.h"
#include "store_abuse.h"
#include "store_test_util.h"
#include "support/child_mode.h"
#include "support/wait_for.h"

namespace lockstep::store_test {

namespace {

constexpr const char* kDirVar = "LOCKSTEP_TEST_SERVER_DIR";
constexpr const char* kFdLimitVar = "LOCKSTEP_TEST_SERVER_FD_LIMIT";

long cpu_ms_of_this_process() {
  rusage u{};
  ::getrusage(RUSAGE_SELF, &u);
  auto ms = [](const timeval& t) { return t.tv_sec * 1000L + t.tv_usec / 1000L; };
  return ms(u.ru_utime) + ms(u.ru_stime);
}

long field(const std::string& output, const std::string& name) {
  size_t at = output.find(name + "=");
  return at == std::string::npos ? -1 : std::stol(output.substr(at + name.size() + 1));
}

}  // namespace

ServerChild::ServerChild(long fd_limit) {
  child_ = std::make_unique<testing::Child>(
      testing::child_argv("StoreServerChild.DISABLED_Serve"),
      std::map<std::string, std::optional<std::string>>{
          {kDirVar, dir_.path()},
          {kFdLimitVar, std::to_string(fd_limit)},
          {"LOCKSTEP_DEBUG", std::nullopt}});  // warnings only: the pipe stays small
  const std::string port_file = dir_.file("port");
  LOCKSTEP_ENFORCE(testing::wait_for_files({port_file}, milliseconds(20'000)), TimeoutError,
                   "the store server child did not start within 20 s");
  port_ = static_cast<uint16_t>(std::stoi(testing::read_file(port_file)));
}

ServerChild::~ServerChild() {
  if (child_) testing::create_marker(dir_.file("stop"));
}

int ServerChild::pid() const {
  return child_->pid();
}

ServerReport ServerChild::stop() {
  testing::create_marker(dir_.file("stop"));
  auto result = child_->wait(milliseconds(20'000));
  ServerReport report{.peak_rss_kib = field(result.output, "peak_rss_kib"),
                      .cpu_ms = field(result.output, "cpu_ms"),
                      .wall_ms = field(result.output, "wall_ms"),
                      .output = result.output};
  child_.reset();
  return report;
}

// Child mode: a TcpStore server until the parent creates the stop marker; then a report line.
TEST(StoreServerChild, DISABLED_Serve) {
  const char* dir = std::getenv(kDirVar);
  ASSERT_NE(dir, nullptr) << "child mode only: run by ServerChild";
  const std::string folder = dir;
  if (long limit = std::atol(std::getenv(kFdLimitVar)); limit > 0) {
    rlimit r{static_cast<rlim_t>(limit), static_cast<rlim_t>(limit)};
    ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &r), 0) << "cannot lower the open-files limit";
  }
  const auto t0 = Clock::now();
  {
    TcpStoreServer server({.bind_host = "127.0.0.1", .port = 0, .secret = kAbuseSecret});
    // Written whole, then renamed: the parent never reads half a port number.
    testing::write_file(folder + "/port.tmp", std::to_string(server.port()));
    std::filesystem::rename(folder + "/port.tmp", folder + "/port");
    while (!std::filesystem::exists(folder + "/stop"))
      std::this_thread::sleep_for(milliseconds(20));
  }
  std::printf("SERVER peak_rss_kib=%ld cpu_ms=%ld wall_ms=%lld\n", status_kib("VmHWM"),
              cpu_ms_of_this_process(), ms_since(t0));
  std::fflush(stdout);
}

}  // namespace lockstep::store_test
