// The one place that includes <mpi.h> for the mpi backend (without Open MPI's C++ bindings).
// Only src/backends/mpi includes it: the rest of lockstep builds without MPI.
#pragma once

#ifndef OMPI_SKIP_MPICXX
#define OMPI_SKIP_MPICXX 1
#endif
#include <mpi.h>
