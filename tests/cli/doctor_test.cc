// `lockstep doctor` end to end: the real executable on deliberately broken environments (bad
// variables, a port held by a real listening socket, an unresolvable or silent master, a
// lowered open-file limit, oversubscribed OpenMP threads) and on good ones, including every rank
// of a real `lockstep run` job.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <sys/socket.h>

#include <algorithm>
#include <chrono>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "cli/cli_test_util.h"
#include "lockstep/store/tcp_store.h"
#include "net/socket.h"
#include "store/refusals.h"
#include "support/messages.h"
#include "support/wait_for.h"

namespace lockstep::testing {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

// Every variable doctor reads, unset: each test sets what it needs on top.
EnvChanges clean_environment() {
  EnvChanges env;
  for (const char* v : {"RANK",
                        "WORLD_SIZE",
                        "LOCAL_RANK",
                        "LOCAL_WORLD_SIZE",
                        "MASTER_ADDR",
                        "MASTER_PORT",
                        "SLURM_PROCID",
                        "SLURM_NTASKS",
                        "SLURM_LOCALID",
                        "SLURM_NTASKS_PER_NODE",
                        "SLURM_JOB_NODELIST",
                        "SLURM_NODELIST",
                        "OMPI_COMM_WORLD_RANK",
                        "OMPI_COMM_WORLD_SIZE",
                        "OMPI_COMM_WORLD_LOCAL_RANK",
                        "OMPI_COMM_WORLD_LOCAL_SIZE",
                        "LOCKSTEP_USE_AGENT_STORE",
                        "LOCKSTEP_STORE_ADDR",
                        "LOCKSTEP_STORE_PORT",
                        "LOCKSTEP_TIMEOUT",
                        "LOCKSTEP_DEBUG",
                        "OMP_NUM_THREADS",
                        "CUDA_VISIBLE_DEVICES"})
    env[v] = std::nullopt;
  return env;
}

// A job of `world` ranks, `local` of them on this host; this process is `rank`.
EnvChanges job(int rank, int world, int local, int port, const std::string& master = "127.0.0.1") {
  EnvChanges env = clean_environment();
  env["RANK"] = std::to_string(rank);
  env["WORLD_SIZE"] = std::to_string(world);
  env["LOCAL_RANK"] = std::to_string(rank % local);
  env["LOCAL_WORLD_SIZE"] = std::to_string(local);
  env["MASTER_ADDR"] = master;
  env["MASTER_PORT"] = std::to_string(port);
  env["OMP_NUM_THREADS"] = "1";
  return env;
}

struct Check {
  std::string status, topic, text, fix;
};

struct Doctor {
  ProcessResult process;
  std::vector<Check> checks;

  // The checks on `topic` with `status`.
  std::vector<Check> find(const std::string& status, const std::string& topic) const {
    std::vector<Check> out;
    for (const Check& c : checks)
      if (c.status == status && c.topic == topic) out.push_back(c);
    return out;
  }
  int count(const std::string& status) const {
    return static_cast<int>(std::count_if(checks.begin(), checks.end(),
                                          [&](const Check& c) { return c.status == status; }));
  }
};

// "ok       topic: text", "         fix: ...", continuation lines indented further.
std::vector<Check> parse_checks(const std::string& output) {
  std::vector<Check> checks;
  std::istringstream lines(output);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("         fix: ", 0) == 0 && !checks.empty()) {
      checks.back().fix = line.substr(14);
    } else if (line.rfind("           ", 0) == 0 && !checks.empty()) {
      std::string& last = checks.back().fix.empty() ? checks.back().text : checks.back().fix;
      last += "\n" + line.substr(11);
    } else if (line.size() > 9 && line[0] != ' ') {
      std::string status = line.substr(0, line.find(' '));
      if (status != "ok" && status != "note" && status != "problem") continue;
      size_t colon = line.find(": ", 9);
      if (colon == std::string::npos) continue;
      checks.push_back({status, line.substr(9, colon - 9), line.substr(colon + 2), ""});
    }
  }
  return checks;
}

Doctor doctor(const EnvChanges& env, std::vector<std::string> args = {}) {
  args.insert(args.begin(), "doctor");
  Doctor d{run_lockstep(args, env), {}};
  d.checks = parse_checks(d.process.output);
  return d;
}

// Runs doctor through /bin/sh with `shell_prefix` before it (e.g. "ulimit -S -n 200;").
Doctor doctor_in_shell(const std::string& shell_prefix, const EnvChanges& env) {
  Doctor d{
      run_process({"/bin/sh", "-c", shell_prefix + " exec \"$0\" doctor", LOCKSTEP_CLI_PATH}, env),
      {}};
  d.checks = parse_checks(d.process.output);
  return d;
}

int usable_cores() {
  cpu_set_t set;
  return sched_getaffinity(0, sizeof(set), &set) == 0 ? std::max(1, CPU_COUNT(&set)) : 1;
}

TEST(Doctor, GoodEnvironmentBeforeTheJobStarts) {
  const int port = free_port();
  for (int rank : {0, 1}) {
    SCOPED_TRACE("rank " + std::to_string(rank));
    Doctor d = doctor(job(rank, 2, 2, port));
    EXPECT_EQ(d.process.exit_code, 0) << d.process.output;
    EXPECT_EQ(d.count("problem"), 0) << d.process.output;
    ASSERT_EQ(d.find("ok", "variables").size(), 1u) << d.process.output;
    EXPECT_TRUE(contains(d.find("ok", "variables")[0].text,
                         "rank " + std::to_string(rank) +
                             " of 2 (from RANK/WORLD_SIZE), local rank " + std::to_string(rank) +
                             " of 2 on this host"));
    for (const char* topic : {"settings", "hostname", "/dev/shm", "open files", "gpus", "backends"})
      EXPECT_EQ(d.find("ok", topic).size() + d.find("note", topic).size(), 1u) << topic;
    if (rank == 0) {
      ASSERT_EQ(d.find("ok", "port").size(), 1u) << d.process.output;
      EXPECT_TRUE(contains(d.find("ok", "port")[0].text,
                           "MASTER_PORT " + std::to_string(port) + " is free on this host"));
    } else {
      ASSERT_EQ(d.find("note", "master").size(), 1u) << d.process.output;
      EXPECT_TRUE(contains(d.find("note", "master")[0].text,
                           "nothing listens at 127.0.0.1:" + std::to_string(port) + " yet"));
    }
  }
}

TEST(Doctor, FindsTheRunningStore) {
  TcpStore store({.port = 0, .is_server = true, .timeout = 10s});
  Doctor d = doctor(job(1, 2, 2, store.port()));
  EXPECT_EQ(d.process.exit_code, 0) << d.process.output;
  ASSERT_EQ(d.find("ok", "master").size(), 1u) << d.process.output;
  EXPECT_EQ(d.find("ok", "master")[0].text,
            "a lockstep store answers at 127.0.0.1:" + std::to_string(store.port()));
}

// Refused connections are counted in the job's store by the refusing ranks: the doctor reports
// none while there are none, then the count and the last one, which names the address.
TEST(Doctor, ReportsConnectionsTheJobRefused) {
  TcpStore store({.port = 0, .is_server = true, .timeout = 10s, .secret = "doctor's job"});
  const EnvChanges env = [&] {
    EnvChanges e = job(1, 2, 2, store.port());
    e["LOCKSTEP_SECRET"] = "doctor's job";
    return e;
  }();
  Doctor d = doctor(env);
  ASSERT_EQ(d.find("ok", "refusals").size(), 1u) << d.process.output;
  note_refusals(store, 2,
                "group 'default' rank 0: a connection from 10.9.8.7:5555 claiming "
                "rank 1 was refused: it does not know the job's secret (wrong proof)");
  d = doctor(env);
  ASSERT_EQ(d.find("problem", "refusals").size(), 1u) << d.process.output;
  EXPECT_TRUE(contains(d.find("problem", "refusals")[0].text,
                       "2 connection(s) to this job were "
                       "refused"));
  EXPECT_TRUE(contains(d.find("problem", "refusals")[0].text, "10.9.8.7:5555"));
}

TEST(Doctor, RankNotBelowWorldSize) {
  Doctor d = doctor(job(2, 2, 2, free_port()));
  EXPECT_EQ(d.process.exit_code, 1) << d.process.output;
  auto problems = d.find("problem", "variables");
  ASSERT_EQ(problems.size(), 1u) << d.process.output;
  EXPECT_TRUE(contains(problems[0].text, "RANK=2 is not below WORLD_SIZE=2 (ranks are 0..1)"))
      << problems[0].text;
  EXPECT_TRUE(contains(problems[0].fix, "lockstep run --nproc-per-node N")) << problems[0].fix;
}

TEST(Doctor, MissingMasterAddressAndMalformedPort) {
  EnvChanges env = job(0, 2, 2, 0);
  env["MASTER_ADDR"] = std::nullopt;
  env["MASTER_PORT"] = "http";
  Doctor d = doctor(env);
  EXPECT_EQ(d.process.exit_code, 1) << d.process.output;
  auto problems = d.find("problem", "variables");
  ASSERT_EQ(problems.size(), 1u) << d.process.output;
  // Both problems in one report.
  EXPECT_TRUE(contains(problems[0].text, "2 problems with the setup")) << problems[0].text;
  EXPECT_TRUE(contains(problems[0].text, "MASTER_ADDR is not set")) << problems[0].text;
  EXPECT_TRUE(contains(problems[0].text, "MASTER_PORT='http' is not a non-negative integer"))
      << problems[0].text;
}

TEST(Doctor, PortTakenByAnotherProgram) {
  net::Fd holder = net::listen_tcp("127.0.0.1", 0);
  const int port = net::local_port(holder.get());
  Doctor d = doctor(job(0, 2, 2, port));
  EXPECT_EQ(d.process.exit_code, 1) << d.process.output;
  auto problems = d.find("problem", "port");
  ASSERT_EQ(problems.size(), 1u) << d.process.output;
  EXPECT_EQ(problems[0].text, "MASTER_PORT " + std::to_string(port) +
                                  " is already in use on this host (another program listens "
                                  "there)");
  EXPECT_TRUE(contains(problems[0].fix, "lockstep run --master-port P")) << problems[0].fix;
}

TEST(Doctor, PortTakenByAnotherLockstepStore) {
  TcpStore store({.port = 0, .is_server = true, .timeout = 10s});
  Doctor d = doctor(job(0, 2, 2, store.port()));
  EXPECT_EQ(d.process.exit_code, 1) << d.process.output;
  auto problems = d.find("problem", "port");
  ASSERT_EQ(problems.size(), 1u) << d.process.output;
  EXPECT_TRUE(contains(problems[0].text,
                       "(a lockstep store listens there: another job, or a "
                       "previous run still exiting)"))
      << problems[0].text;
}

TEST(Doctor, UnresolvableMaster) {
  const auto start = Clock::now();
  Doctor d = doctor(job(1, 2, 2, 29500, "nonexistent-host.invalid"));
  EXPECT_LT(Clock::now() - start, 30s);  // bounded by the probe timeout, not the resolver
  EXPECT_EQ(d.process.exit_code, 1) << d.process.output;
  auto problems = d.find("problem", "master");
  ASSERT_EQ(problems.size(), 1u) << d.process.output;
  EXPECT_TRUE(
      contains(problems[0].text, "MASTER_ADDR 'nonexistent-host.invalid' does not resolve") ||
      contains(problems[0].text, "looking up MASTER_ADDR 'nonexistent-host.invalid' took"))
      << problems[0].text;
  EXPECT_EQ(d.find("ok", "variables").size(), 1u);  // the variables themselves are fine
}

// A master that never answers (as behind a firewall that drops packets): a listener whose
// accept queue is full, so the kernel drops further connection requests.
TEST(Doctor, MasterThatDoesNotAnswer) {
  net::Fd listener = net::listen_tcp("127.0.0.1", 0, /*backlog=*/0);
  const int port = net::local_port(listener.get());
  std::vector<net::Fd> queued;
  for (int i = 0; i < 3; ++i) {
    queued.emplace_back(::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0));
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ::connect(queued.back().get(), reinterpret_cast<const sockaddr*>(&a), sizeof(a));
  }
  // The accept queue is full once a queued handshake has completed (the socket turns writable
  // without an error); then the kernel drops further connection requests, doctor's included.
  const bool queue_full = wait_until(
      [&] {
        for (const net::Fd& fd : queued) {
          pollfd p{fd.get(), POLLOUT, 0};
          int error = 0;
          socklen_t length = sizeof error;
          if (::poll(&p, 1, 0) == 1 && (p.revents & POLLOUT) &&
              ::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &error, &length) == 0 && error == 0)
            return true;
        }
        return false;
      },
      10s);
  ASSERT_TRUE(queue_full) << "no connection to the listener completed its handshake";
  const auto start = Clock::now();
  Doctor d = doctor(job(1, 2, 2, port), {"--probe-timeout", "1"});
  EXPECT_LT(Clock::now() - start, 30s);
  EXPECT_EQ(d.process.exit_code, 1) << d.process.output;
  auto problems = d.find("problem", "master");
  ASSERT_EQ(problems.size(), 1u) << d.process.output;
  EXPECT_TRUE(contains(problems[0].text,
                       "cannot reach 127.0.0.1:" + std::to_string(port) + ": Connection timed out"))
      << problems[0].text;
  EXPECT_TRUE(contains(problems[0].text,
                       "(no answer: a host that is down, or a firewall dropping "
                       "packets)"))
      << problems[0].text;
  EXPECT_TRUE(contains(problems[0].fix, "nc -z 127.0.0.1 " + std::to_string(port)))
      << problems[0].fix;
}

TEST(Doctor, OpenFileLimitAgainstWorldSize) {
  // The same lowered soft limit is enough for 2 ranks and too low for 256.
  Doctor small = doctor_in_shell("ulimit -S -n 200;", job(1, 2, 1, free_port()));
  ASSERT_EQ(small.find("ok", "open files").size(), 1u) << small.process.output;
  EXPECT_TRUE(contains(small.find("ok", "open files")[0].text, "limit 200 ("));

  Doctor big = doctor_in_shell("ulimit -S -n 200;", job(1, 256, 1, free_port()));
  EXPECT_EQ(big.process.exit_code, 1) << big.process.output;
  auto problems = big.find("problem", "open files");
  ASSERT_EQ(problems.size(), 1u) << big.process.output;
  EXPECT_TRUE(contains(problems[0].text, "limit 200 (")) << problems[0].text;
  EXPECT_TRUE(contains(problems[0].text, "a rank of a 256-rank job needs about 3"))
      << problems[0].text;
  EXPECT_TRUE(contains(problems[0].fix, "nofile") || contains(problems[0].fix, "ulimit -n "))
      << problems[0].fix;
}

TEST(Doctor, OversubscribedOpenMpThreads) {
  const int cores = usable_cores();
  EnvChanges env = job(1, 2, 2, free_port());
  env["OMP_NUM_THREADS"] = std::to_string(4 * cores);
  Doctor d = doctor(env);
  EXPECT_EQ(d.process.exit_code, 1) << d.process.output;
  auto problems = d.find("problem", "cores");
  ASSERT_EQ(problems.size(), 1u) << d.process.output;
  EXPECT_TRUE(contains(problems[0].text,
                       "2 ranks on this host x OMP_NUM_THREADS=" + std::to_string(4 * cores) +
                           " = " + std::to_string(8 * cores) + " threads on " +
                           std::to_string(cores)))
      << problems[0].text;
  EXPECT_TRUE(
      contains(problems[0].fix, "set OMP_NUM_THREADS=" + std::to_string(std::max(1, cores / 2))))
      << problems[0].fix;

  env["OMP_NUM_THREADS"] = "lots";
  Doctor bad = doctor(env);
  ASSERT_EQ(bad.find("problem", "cores").size(), 1u) << bad.process.output;
  EXPECT_TRUE(contains(bad.find("problem", "cores")[0].text,
                       "OMP_NUM_THREADS='lots' is not a positive integer"));
}

TEST(Doctor, NoLauncherVariablesSaysHowToRunIt) {
  Doctor d = doctor(clean_environment());
  EXPECT_EQ(d.process.exit_code, 1) << d.process.output;
  auto problems = d.find("problem", "variables");
  ASSERT_EQ(problems.size(), 1u) << d.process.output;
  EXPECT_TRUE(contains(problems[0].text, "none of the launcher's variables is set"));
  EXPECT_TRUE(contains(problems[0].fix, "lockstep run --nproc-per-node N -- lockstep doctor"))
      << problems[0].fix;
  EXPECT_TRUE(contains(problems[0].fix,
                       "MASTER_ADDR=host0 MASTER_PORT=29500 RANK=0 WORLD_SIZE=2 "
                       "lockstep doctor"))
      << problems[0].fix;
  // The host checks still run.
  for (const char* topic : {"/dev/shm", "cores", "open files", "gpus", "backends"})
    EXPECT_EQ(
        d.find("ok", topic).size() + d.find("note", topic).size() + d.find("problem", topic).size(),
        1u)
        << topic;
}

TEST(Doctor, BadSettingAndUsage) {
  EnvChanges env = job(1, 2, 2, free_port());
  env["LOCKSTEP_TIMEOUT"] = "soon";
  Doctor d = doctor(env);
  EXPECT_EQ(d.process.exit_code, 1) << d.process.output;
  ASSERT_EQ(d.find("problem", "settings").size(), 1u) << d.process.output;
  EXPECT_TRUE(contains(d.find("problem", "settings")[0].text, "LOCKSTEP_TIMEOUT='soon'"));

  ProcessResult usage = run_lockstep({"doctor", "--fast"});
  EXPECT_EQ(usage.exit_code, 2);
  EXPECT_TRUE(contains(usage.output, "unknown argument '--fast'")) << usage.output;
}

// Every rank of a real job: the launcher's store answers, and nothing is wrong.
TEST(Doctor, EveryRankUnderTheLauncher) {
  EnvChanges env = clean_environment();
  ProcessResult r = run_lockstep(
      {"run", "--standalone", "--nproc-per-node", "2", "--", LOCKSTEP_CLI_PATH, "doctor"}, env,
      120s);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  size_t answers = 0;
  for (size_t at = r.output.find("master: a lockstep store answers at 127.0.0.1:");
       at != std::string::npos;
       at = r.output.find("master: a lockstep store answers at 127.0.0.1:", at + 1))
    ++answers;
  EXPECT_EQ(answers, 2u) << r.output;
  EXPECT_TRUE(contains(r.output, "rank 0 of 2 (from RANK/WORLD_SIZE)")) << r.output;
  EXPECT_TRUE(contains(r.output, "rank 1 of 2 (from RANK/WORLD_SIZE)")) << r.output;
  EXPECT_FALSE(contains(r.output, "problem  ")) << r.output;
}

}  // namespace
}  // namespace lockstep::testing
