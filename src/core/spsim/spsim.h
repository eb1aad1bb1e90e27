/**
 * @file spsim.h
 * @brief Umbrella header of libspsim: process topologies, byte sizes, the communication graph
 *        IR, lowering of collectives into per-rank programs, reference semantics,
 *        the transport interface and the executor.
 */
#ifndef SPSIM_SPSIM_H
#define SPSIM_SPSIM_H

#include "spsim/error.h"
#include "spsim/dtype.h"
#include "spsim/program.h"
#include "spsim/transport.h"
#include "spsim/coll.h"
#include "spsim/tuning.h"
#include "spsim/exec.h"
#include "spsim/verify.h"
#include "spsim/topology.h"
#include "spsim/units.h"
#include "spsim/nccltests.h"

#include "spsim/graph.h"
#include "spsim/kernels.h"
#include "spsim/ops.h"

#endif
