/* Private interface between the SimGrid engine's files (sim.c, sim_load.c, sim_coll.c). */
#ifndef SPSIM_SIM_PRIV_H
#define SPSIM_SIM_PRIV_H

#include <glib.h>
#include <simgrid/host.h>

#include <simgrid/link.h>

#include "flow.h"
#include "platform.h"
#include "sim.h"
#include "spsim/tuning.h"

/* The engine's global state (sim.c): the loaded platform, the rank-to-host map, the
 * cost attributes of the collective being priced. SimGrid holds one platform per
 * process, so there is one. */
typedef struct {
  gboolean ready;
  char *path;
  char *gpu_model;     /* the platform's `gpu` property (NULL: none) */
  int32_t nhosts;
  char **names;        /* declaration order */
  sg_host_t *hosts;
  double *mem_bw;      /* bytes/s, 0 = free */
  double *local_lat;   /* seconds per local step */
  double *coll_lat;    /* seconds charged once per collective (op id) per rank */
  int32_t *node;       /* host property "node", -1 when absent */
  int32_t *map;        /* rank -> host, map_n entries */
  int32_t map_n;
  GHashTable *lat;     /* (host a, host b) -> route latency + 1 (cache, filled inside actors) */
  uint32_t generation; /* mailbox namespace; bumped after a failed run */
  char **argv;         /* handed to simgrid_init, kept for the process lifetime */
  GPtrArray *args;     /* owns the strings of argv */
  sp_sim_compute_fn compute;
  void *compute_ud;
  sp_tune_arch arch;   /* GPU generation of the platform's `gpu` model (tuning model) */
  gboolean nvls;       /* platform property nvls: the NVSwitches reduce */
  gboolean sharp;      /* platform property sharp: the network switches reduce */
  double sharp_bw;     /* platform property sharp_bw, B/s (0: the NICs' line rate) */
  sp_tuner tuner;      /* platform property nccl_tuner: the cluster's NCCL tuner plugin */
  sp_tune_cost cost;   /* cost attributes of the collective being priced (neutral: 1s) */
  /* link latencies scaled by the protocol (sp_sim_set_cost): every link on a route
   * between GPUs, its latency as loaded, and whether it lies inside a node */
  gboolean links_ready;
  guint nlinks;
  sg_link_t *links;
  double *link_lat0;
  gboolean *link_intra;
  double lat_fi, lat_fe; /* factors applied now (1, 1 as loaded) */
  /* sibling groups priced by symmetry (sim_coll.c, sp_sim_set_sibling_symmetry) */
  gboolean sym_off;    /* every group simulated */
  GHashTable *sym;     /* groups' hosts -> GArray of sym_link (NULL value: not symmetric) */
  /* called once a FLOW run's programs are built, before they run (sim_coll.c): FALSE
   * stops the run (with @p err set: an error; without: the caller's to say why) */
  gboolean (*before_run)(void *ud, sp_program *const *progs, int32_t world, GError **err);
  void *before_ud;
} sp_sim_state;
extern sp_sim_state g_sim;
/* SPSIM_FLOW_STEPS set: FLOW summaries of rings read every step (no
 * sp_lower_coll_pattern), to check that both give the same programs. */
extern gboolean g_sim_no_pattern;

/* FLOW, for sources that can stream: summarise every rank of [0, @p world) into
 * @p fp (@p refine: every rank sp_flow_plan_needs) with sp_flow_plan_begin,
 * sp_flow_sum_feed and sp_flow_sum_end, without materialising programs. */
typedef gboolean (*flow_stream_fn)(void *ud, sp_flow_plan *fp, int32_t world, gboolean refine,
                                   GError **err);

/* One run of @p world ranks (sim.c): programs from @p get (streamed by @p stream in
 * FLOW when not NULL), @p trusted when they are valid by construction, data in
 * @p bufs (NULL: cost mode); the makespan in seconds. */
gboolean sp_sim_run_common(sp_sim_program_fn get, sp_sim_release_fn release, flow_stream_fn stream, void *ud,
                           int32_t world, gboolean trusted, void **const *bufs, sp_fidelity fid, sp_trace *trace,
                           double *makespan, GError **err);

/* SimGrid's command line for @p pp (its <config> properties, SPSIM_SIMGRID_ARGS);
 * @p quiet silences SimGrid's log. NULL-terminated, owns its strings. */
GPtrArray *sp_sim_args_new(const sp_plat_desc *pp, gboolean quiet);

/* Make room for @p nactors SimGrid actors about to start. Each actor's stack is a
 * memory mapping, and with SimGrid's guard page two, against Linux's per-process
 * limit (vm.max_map_count, 65,530 by default): beyond it SimGrid aborts. Where the
 * count would not fit, raw contexts run this batch without guard pages, their
 * stacks mapped whole by malloc (adjacent mappings merge, pages untouched until
 * used); thread contexts (sanitizer builds) cannot, and @return FALSE with an error
 * that says what to raise. @p guard receives the guard size to restore afterwards
 * with sp_sim_actors_done (-1: unchanged). */
gboolean sp_sim_reserve_actors(int64_t nactors, int *guard, GError **err);
void sp_sim_actors_done(int guard);

/* Seal the loaded platform (SimGrid's engine state after loading). */
void sp_sim_seal_platform(void);

/* Fill @p out with SimGrid's hosts in the declaration order of @p names;
 * @return FALSE when the names do not match SimGrid's hosts one to one. */
gboolean sp_sim_hosts_by_names(const GPtrArray *names, sg_host_t *out, size_t n);

/* Read @p path and check it in a forked child (SimGrid aborts on files it
 * rejects); @return its description, or NULL with an error saying why. */
sp_plat_desc *sp_sim_read_checked(const char *path, GError **err);
/* The same check, after which the checking child carries on as this process with
 * the platform loaded into SimGrid (its arguments in g_sim.args), while the process
 * that called waits and ends as it ends: one load of the platform. NULL with @p err
 * (this process, nothing loaded) when the check fails. */
sp_plat_desc *sp_sim_load_checked(const char *path, GError **err);

#endif
