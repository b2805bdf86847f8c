// How many sockets a rank of a tcp job holds once it has run collectives and p2p: its store
// connection and one connection per peer, which carries both (docs/architecture.md,
// "Connections"); no listener is left open after setup. Four real processes run an all_reduce
// and a ring shift, then each counts the sockets in /proc/self/fd and tells their kinds by
// /proc/net/tcp's states. Rank 0 hosts the store (its sockets differ), so ranks 1-3 are counted.
// Before the p2p stream moved onto the mesh's connections a rank held 7: 2 p2p connections and
// a p2p listener more. A new connection per peer, or a listener left open, fails it.
#include <dirent.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include "lockstep/group/init.h"
#include "support/child_mode.h"
#include "support/subprocess.h"

namespace lockstep::testing {
namespace {

using Env = std::map<std::string, std::optional<std::string>>;
using namespace std::chrono_literals;

// The inodes of this process's sockets.
std::set<std::string> socket_inodes() {
  std::set<std::string> inodes;
  DIR* dir = ::opendir("/proc/self/fd");
  if (!dir) return inodes;
  while (dirent* e = ::readdir(dir)) {
    char target[128] = {};
    const std::string path = std::string("/proc/self/fd/") + e->d_name;
    const ssize_t n = ::readlink(path.c_str(), target, sizeof target - 1);
    const std::string t(target, n > 0 ? static_cast<size_t>(n) : 0);
    if (t.rfind("socket:[", 0) == 0) inodes.insert(t.substr(8, t.size() - 9));
  }
  ::closedir(dir);
  return inodes;
}

// The inodes of TCP sockets in the LISTEN state (st 0A), from /proc/net/tcp and tcp6.
std::set<std::string> listening_inodes() {
  std::set<std::string> out;
  for (const char* file : {"/proc/net/tcp", "/proc/net/tcp6"}) {
    std::ifstream in(file);
    std::string line;
    std::getline(in, line);  // the header
    while (std::getline(in, line)) {
      std::istringstream f(line);
      std::string sl, local, remote, st, queues, tr, retr, uid, timeout, inode;
      f >> sl >> local >> remote >> st >> queues >> tr >> retr >> uid >> timeout >> inode;
      if (st == "0A") out.insert(inode);
    }
  }
  return out;
}

TEST(SocketCountChild, DISABLED_Main) {
  auto pg = init_process_group({.backend = "tcp"});
  const int n = pg->size(), next = (pg->rank() + 1) % n, prev = (pg->rank() + n - 1) % n;
  std::vector<float> x(1024, 1.0f), in(1024);
  pg->all_reduce(view(x))->wait();
  auto s = pg->send(view(x), next);
  pg->recv(view(in), prev)->wait();
  s->wait();
  const std::set<std::string> mine = socket_inodes(), listening = listening_inodes();
  int listeners = 0;
  for (const std::string& i : mine) listeners += listening.count(i) ? 1 : 0;
  std::printf("CHILD SOCKETS %zu LISTENING %d SUM %g SHIFTED %g\n", mine.size(), listeners,
              static_cast<double>(x[0]), static_cast<double>(in[1023]));
  std::fflush(stdout);
  pg->barrier()->wait();  // nobody leaves (closing sockets) before all have counted
}

TEST(SocketCount, ARankOfAFourRankTcpJobHoldsItsStoreAndOneConnectionPerPeer) {
  constexpr int kRanks = 4;
  const int port = free_port();
  std::vector<Child> children;
  for (int r = 0; r < kRanks; ++r)
    children.emplace_back(child_argv("SocketCountChild.DISABLED_Main"),
                          Env{{"RANK", std::to_string(r)},
                              {"WORLD_SIZE", std::to_string(kRanks)},
                              {"MASTER_ADDR", "127.0.0.1"},
                              {"MASTER_PORT", std::to_string(port)},
                              {"LOCKSTEP_USE_AGENT_STORE", std::nullopt},
                              {"LOCKSTEP_RESTART_COUNT", std::nullopt}});
  for (int r = 0; r < kRanks; ++r) {
    const ProcessResult res = children[static_cast<size_t>(r)].wait(60s);
    size_t sockets = 0;
    int listeners = -1;
    double sum = 0, shifted = 0;
    const size_t at = res.output.find("CHILD SOCKETS ");
    ASSERT_NE(at, std::string::npos) << res.output;
    ASSERT_EQ(
        std::sscanf(res.output.c_str() + at, "CHILD SOCKETS %zu LISTENING %d SUM %lf SHIFTED %lf",
                    &sockets, &listeners, &sum, &shifted),
        4)
        << res.output;
    EXPECT_EQ(sum, 4.0) << res.output;
    EXPECT_EQ(shifted, 4.0) << "the ring shift carries the reduced buffer\n" << res.output;
    if (r == 0) continue;  // it hosts the store: the store's listener and its clients too
    // 1 store + 3 mesh connections, which carry the p2p stream as well.
    EXPECT_EQ(sockets, 4u) << "rank " << r << ":\n" << res.output;
    EXPECT_EQ(listeners, 0) << "rank " << r << ": nothing listens after setup";
  }
}

}  // namespace
}  // namespace lockstep::testing
