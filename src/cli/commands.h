// Subcommands of the `lockstep` executable. Each takes the arguments after its own name
// (argv[0] is the subcommand) and returns the process exit code.
#pragma once

namespace lockstep::cli {

int run_command(int argc, char** argv);      // lockstep run: the launcher (launcher.cc)
int bench_command(int argc, char** argv);    // lockstep bench: collective benchmarks (bench.cc)
int doctor_command(int argc, char** argv);   // lockstep doctor: pre-flight checks (doctor.cc)
int explain_command(int argc, char** argv);  // lockstep explain: explain a failure log (explain.cc)
int trace_command(int argc, char** argv);  // lockstep trace: merge flight-recorder dumps (trace.cc)

}  // namespace lockstep::cli
