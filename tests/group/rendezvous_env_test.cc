// read_rendezvous: every missing or malformed variable named in one ConfigError, with the
// launcher command; Slurm and Open MPI fallbacks; tcp:// and file:// parsing.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "group/rendezvous_env.h"
#include "lockstep/core/error.h"
#include "lockstep/group/init.h"

namespace lockstep {
namespace {

EnvLookup env_of(std::map<std::string, std::string> vars) {
  return [vars](const std::string& name) -> std::optional<std::string> {
    auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

std::string config_error(const InitOptions& options, std::map<std::string, std::string> vars) {
  try {
    read_rendezvous(options, env_of(std::move(vars)));
  } catch (const ConfigError& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected ConfigError";
  return "";
}

bool has(const std::string& text, const std::string& fragment) {
  return text.find(fragment) != std::string::npos;
}

TEST(RendezvousEnv, CompleteEnvironment) {
  auto rv = read_rendezvous({}, env_of({{"RANK", "2"},
                                        {"WORLD_SIZE", "4"},
                                        {"MASTER_ADDR", "h0"},
                                        {"MASTER_PORT", "29500"},
                                        {"LOCAL_RANK", "0"},
                                        {"LOCAL_WORLD_SIZE", "2"}}));
  EXPECT_EQ(rv.rank, 2);
  EXPECT_EQ(rv.world_size, 4);
  EXPECT_EQ(rv.local_rank, 0);
  EXPECT_EQ(rv.local_world_size, 2);
  EXPECT_EQ(rv.master_addr, "h0");
  EXPECT_EQ(rv.master_port, 29500);
}

TEST(RendezvousEnv, EveryMissingVariableNamedAtOnce) {
  std::string msg = config_error({}, {});
  EXPECT_TRUE(has(msg, "4 problems")) << msg;
  for (const char* name : {"RANK is not set", "WORLD_SIZE is not set", "MASTER_ADDR is not set",
                           "MASTER_PORT is not set", "lockstep run --nproc-per-node"})
    EXPECT_TRUE(has(msg, name)) << "missing '" << name << "' in: " << msg;
}

TEST(RendezvousEnv, MalformedValuesNamed) {
  std::string msg = config_error({}, {{"RANK", "x1"},
                                      {"WORLD_SIZE", "0"},
                                      {"MASTER_ADDR", "h"},
                                      {"MASTER_PORT", "70000"},
                                      {"LOCAL_RANK", "-3"}});
  for (const char* part : {"RANK='x1'", "WORLD_SIZE='0'", "MASTER_PORT=70000", "LOCAL_RANK='-3'"})
    EXPECT_TRUE(has(msg, part)) << "missing '" << part << "' in: " << msg;
}

TEST(RendezvousEnv, RankNotBelowWorldSize) {
  std::string msg = config_error(
      {}, {{"RANK", "4"}, {"WORLD_SIZE", "4"}, {"MASTER_ADDR", "h"}, {"MASTER_PORT", "1"}});
  EXPECT_TRUE(has(msg, "RANK=4 is not below WORLD_SIZE=4")) << msg;
}

TEST(RendezvousEnv, SlurmVariables) {
  auto rv = read_rendezvous({}, env_of({{"SLURM_PROCID", "5"},
                                        {"SLURM_NTASKS", "8"},
                                        {"SLURM_LOCALID", "1"},
                                        {"SLURM_JOB_NODELIST", "gpu[07-09,12],cpu1"},
                                        {"MASTER_PORT", "29400"}}));
  EXPECT_EQ(rv.rank, 5);
  EXPECT_EQ(rv.world_size, 8);
  EXPECT_EQ(rv.local_rank, 1);
  EXPECT_EQ(rv.master_addr, "gpu07");
  EXPECT_EQ(rv.source, "Slurm");
}

// [Slurm] Under srun without MASTER_ADDR / MASTER_PORT: the first host of the node list (Slurm's
// compressed hostlist forms) and 15000 + the last 4 digits of the job id; explicit values win.
TEST(RendezvousEnv, SlurmWithoutMasterVariablesDerivesAddressAndPort) {
  const std::vector<std::pair<std::string, std::string>> lists = {
      {"node[01-04,07]", "node01"},
      {"gpu5", "gpu5"},
      {"a,b,c", "a"},
      {"rack1-n[3-5],rack2-n[1-2]", "rack1-n3"},
      {"n[10,12-13]", "n10"},
      {"login[007]", "login007"}};
  for (const auto& [list, first] : lists) {
    auto rv = read_rendezvous({}, env_of({{"SLURM_PROCID", "1"},
                                          {"SLURM_NTASKS", "4"},
                                          {"SLURM_JOB_NODELIST", list},
                                          {"SLURM_JOB_ID", "1234567"}}));
    EXPECT_EQ(rv.master_addr, first) << list;
    EXPECT_EQ(rv.master_port, 15000 + 4567) << list;
    EXPECT_TRUE(has(rv.derived, "the first host of SLURM_JOB_NODELIST=" + list)) << rv.derived;
    EXPECT_TRUE(has(rv.derived, "port 19567: from SLURM_JOB_ID=1234567")) << rv.derived;
  }
  auto explicit_port = read_rendezvous({}, env_of({{"SLURM_PROCID", "0"},
                                                   {"SLURM_NTASKS", "2"},
                                                   {"SLURM_JOB_NODELIST", "x[1-2]"},
                                                   {"SLURM_JOB_ID", "77"},
                                                   {"MASTER_PORT", "29400"},
                                                   {"MASTER_ADDR", "head"}}));
  EXPECT_EQ(explicit_port.master_port, 29400);
  EXPECT_EQ(explicit_port.master_addr, "head");
  EXPECT_EQ(explicit_port.derived, "");
  std::string msg = config_error({}, {{"SLURM_PROCID", "0"},
                                      {"SLURM_NTASKS", "2"},
                                      {"SLURM_JOB_NODELIST", "x1"},
                                      {"SLURM_JOB_ID", "12ab"}});
  EXPECT_TRUE(has(msg, "SLURM_JOB_ID='12ab' is not a number")) << msg;
  EXPECT_EQ(slurm_port(42), 15042);
  EXPECT_EQ(slurm_port(9999), 24999);
}

TEST(RendezvousEnv, OpenMpiVariables) {
  auto rv = read_rendezvous({}, env_of({{"OMPI_COMM_WORLD_RANK", "1"},
                                        {"OMPI_COMM_WORLD_SIZE", "3"},
                                        {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
                                        {"OMPI_COMM_WORLD_LOCAL_SIZE", "3"},
                                        {"MASTER_ADDR", "m"},
                                        {"MASTER_PORT", "2"}}));
  EXPECT_EQ(rv.rank, 1);
  EXPECT_EQ(rv.world_size, 3);
  EXPECT_EQ(rv.local_world_size, 3);
  EXPECT_EQ(rv.source, "Open MPI");
}

TEST(RendezvousEnv, RankVariablesWinOverSlurm) {
  auto rv = read_rendezvous({}, env_of({{"RANK", "0"},
                                        {"WORLD_SIZE", "2"},
                                        {"SLURM_PROCID", "5"},
                                        {"SLURM_NTASKS", "8"},
                                        {"MASTER_ADDR", "a"},
                                        {"MASTER_PORT", "3"}}));
  EXPECT_EQ(rv.rank, 0);
  EXPECT_EQ(rv.world_size, 2);
}

// The ranks on this host (what every backend's wait policy asks about) come from the family the
// rank came from: a torchrun LOCAL_WORLD_SIZE beside a Slurm job's variables is the one that
// counts.
TEST(RendezvousEnv, LocalWorldSizeFromTheSameFamilyAsTheRank) {
  EXPECT_EQ(local_world_size_from(env_of({{"RANK", "0"},
                                          {"LOCAL_WORLD_SIZE", "4"},
                                          {"SLURM_PROCID", "0"},
                                          {"SLURM_NTASKS", "8"},
                                          {"SLURM_NTASKS_PER_NODE", "2"}})),
            4);
  EXPECT_EQ(local_world_size_from(env_of({{"SLURM_PROCID", "0"},
                                          {"SLURM_NTASKS", "8"},
                                          {"SLURM_NTASKS_PER_NODE", "2"},
                                          {"LOCAL_WORLD_SIZE", "4"}})),
            2);
  EXPECT_EQ(local_world_size_from(
                env_of({{"OMPI_COMM_WORLD_RANK", "0"}, {"OMPI_COMM_WORLD_LOCAL_SIZE", "3"}})),
            3);
  EXPECT_EQ(local_world_size_from(env_of({{"RANK", "0"}})), -1);
  EXPECT_EQ(local_world_size_from(env_of({{"LOCAL_WORLD_SIZE", "two"}})), -1);
  EXPECT_EQ(local_world_size_from(env_of({{"LOCAL_WORLD_SIZE", "0"}})), -1);
}

TEST(RendezvousEnv, TcpUrl) {
  auto rv = read_rendezvous({.init_method = "tcp://10.1.2.3:4567", .rank = 1, .world_size = 2},
                            env_of({}));
  EXPECT_EQ(rv.master_addr, "10.1.2.3");
  EXPECT_EQ(rv.master_port, 4567);
  auto v6 =
      read_rendezvous({.init_method = "tcp://[::1]:80", .rank = 0, .world_size = 1}, env_of({}));
  EXPECT_EQ(v6.master_addr, "::1");
  std::string msg = config_error({.init_method = "tcp://hostonly", .rank = 0, .world_size = 1}, {});
  EXPECT_TRUE(has(msg, "tcp://HOST:PORT")) << msg;
}

TEST(RendezvousEnv, FileAndUnknownMethods) {
  EXPECT_NO_THROW(
      read_rendezvous({.init_method = "file:///tmp/x", .rank = 0, .world_size = 1}, env_of({})));
  std::string msg = config_error({.init_method = "udp://x", .rank = 0, .world_size = 1}, {});
  EXPECT_TRUE(has(msg, "udp://x")) << msg;
}

}  // namespace
}  // namespace lockstep
