/* spsim-run --step: the step graph run at the model's real sizes (step_exec.c). */
#ifndef SPSIM_NCCL_STEP_EXEC_H
#define SPSIM_NCCL_STEP_EXEC_H

#include "run_priv.h"
#include "spsim/stepgraph.h"
#include "step_compute.h"

/* Bytes a rank of stage @p stage allocates to run @p g with @p kernels. */
double step_exec_bytes(const sp_stepgraph *g, int32_t stage, const GArray *kernels);

/* Run @p g (built for mpirun's world: rank r runs stage r / ranks_per_stage) with this
 * rank's compute kernels (@p kernels, @p koff from sk_plan), on the CPU or, with @p gpu,
 * on the rank's GPU.
 * Every rank receives each task's start and end (its stage's representative's, seconds
 * from a common barrier; task count entries, may be NULL) and the step time (the last
 * end over ranks); @p kind_s (3 entries, may be NULL) adds this rank's seconds in its
 * kernels per sk_kind (polls of the communication included). FALSE with
 * SP_ERROR_TRANSPORT when a call fails or nothing progresses for the timeout. */
gboolean step_exec_run(runner *r, const sp_stepgraph *g, const GArray *kernels, const uint32_t *koff,
                       sk_gpu *gpu, double *start, double *end, double *step_s, double *kind_s, GError **err);

#endif
