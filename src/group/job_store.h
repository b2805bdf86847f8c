// The job's store, opened as init_process_group opens it: env:// (MASTER_ADDR/MASTER_PORT, rank 0
// hosting it), the launcher's store (scoped to this attempt), tcp://, file://, MPI's bootstrap, or
// the caller's. lockstep::rpc's init_rpc opens it the same way, so that a program that uses both
// finds one rendezvous: a store this process hosts on a port is shared, not bound twice.
#pragma once

#include <memory>
#include <string>

#include "group/rendezvous_env.h"
#include "lockstep/group/init.h"
#include "lockstep/store/store.h"

namespace lockstep {

struct JobStore {
  std::shared_ptr<Store> store;
  EnvRendezvous rv;               // this process's rank and the world size
  std::string advertise_address;  // where peers reach this process's listeners
  std::string description;        // "TcpStore 127.0.0.1:29500 (the launcher's)", for logs
  bool own_store = false;         // env://, no launcher: every refusal the store holds counts
  bool hosts_server = false;      // this process runs the store's server
};

// Reads the rendezvous from options and the environment (read_rendezvous) and opens its store.
JobStore open_job_store(const InitOptions& options);

}  // namespace lockstep
