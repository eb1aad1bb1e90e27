/**
 * @file whatif.h
 * @brief What-if analysis: rank the parallel layouts of a model on a cluster by
 *        predicted step time, with memory per GPU and exposed communication.
 *
 * A what-if evaluates one layout or a sweep of layouts with the closed-form step model
 * (step.h), then runs the step graph of the layouts that may win (within 10 % of the
 * best closed form) and ranks them: fitting before not fitting, simulated before
 * closed form only, then by step time to 5 significant digits, then by memory.
 *
 * libspsim holds everything that needs no engine. An engine plugs in through
 * sp_whatif_engine (pricing collectives on a platform, running step graphs with
 * contention) and sp_whatif_verify_engine (running the `--verify` checks in data
 * mode); without one the what-if prices collectives with the analytic alpha-beta
 * model and ranks by the closed form. spsim's SimGrid engine provides both
 * (src/sim/whatif_sim.h, sp_whatif_run()).
 *
 * Errors name an option by its `spsim` flag ("--seq" for sp_whatif_opts::seq), say
 * what was wrong and how to fix it; nothing here prints or exits: warnings and notes
 * go to sp_whatif_opts::report.
 */
#ifndef SPSIM_WHATIF_H
#define SPSIM_WHATIF_H

#include <glib.h>
#include <stdint.h>
#include "spsim/layout.h"
#include "spsim/model.h"
#include "spsim/ops.h"
#include "spsim/step.h"
#include "spsim/step_replay.h"

G_BEGIN_DECLS

/** An integer option left to its default (sp_whatif_opts). */
#define SP_WHATIF_UNSET_INT G_MININT
/** A real option left to its default (sp_whatif_opts). */
#define SP_WHATIF_UNSET_DBL (-G_MAXDOUBLE)
/** Layouts whose step graph is simulated by default. */
#define SP_WHATIF_SIMULATE_DEFAULT 64

/** What a message passed to sp_whatif_report_fn is. */
typedef enum {
  SP_WHATIF_WARNING = 0, /**< something ignored on request (--lenient) */
  SP_WHATIF_NOTE,        /**< a fallback taken (analytic pricing, closed form of one layout) */
  SP_WHATIF_VERIFY       /**< one line of the `--verify` report (may start with a newline) */
} sp_whatif_msg;

/** Receives warnings, notes and verify report lines, as they happen. */
typedef void (*sp_whatif_report_fn)(void *user, sp_whatif_msg kind, const char *text);
/** Called after each evaluated layout (@p done of @p total). */
typedef void (*sp_whatif_progress_fn)(void *user, guint done, guint total);

/**
 * The sweep spread over processes (`mpirun -np N spsim PLATFORM.xml`): every process
 * runs the same what-if with its own @c rank; each prices a contiguous share of the
 * layouts with the closed form and runs every N-th step graph of each round, and rank 0
 * gathers the results, ranks them and alone returns a full result (the other ranks'
 * results are empty). The caller provides the transport; results travel as their
 * in-memory bytes, so every process runs the same build. Every run of the engine
 * starts at time 0, so a layout's figures do not depend on which process priced it:
 * rank 0's result is the one-process result, bit for bit.
 */
typedef struct {
  int32_t rank;  /**< this process, 0 .. size - 1 */
  int32_t size;  /**< processes (> 1) */
  /** Rank 0: @p *all receives every rank's @p mine (GBytes, rank order; free with
   *  g_ptr_array_unref); the other ranks send @p mine and get NULL. */
  gboolean (*gather)(void *user, GBytes *mine, GPtrArray **all, GError **err);
  /** Rank 0's @p *buf to every rank: rank 0 passes it, the others receive it in @p *buf. */
  gboolean (*bcast)(void *user, GBytes **buf, GError **err);
  void *user;
  gboolean finished; /**< set once the last exchange is over (the transport may then close) */
} sp_whatif_spread;

/**
 * The request, as `spsim PLATFORM.xml` flags give it. Strings are borrowed (the
 * library neither keeps nor frees them past the call that reads them). Fill with
 * sp_whatif_opts_init() first: UNSET values take the defaults documented here.
 */
typedef struct {
  const char *model;              /**< --model: built-in name or FILE.json; NULL: llama3-70b from 128 GPUs, else llama3-8b */
  const char *const *model_dirs;  /**< NULL-terminated folders searched for built-in models (may be NULL) */
  gboolean lenient;               /**< --lenient: unknown model keys and host properties are warnings */
  int64_t seq;                    /**< --seq: tokens per sequence (8192) */
  const char *global_batch;       /**< --global-batch: "1024" sequences or tokens "4M", "8192tok"; NULL: 1024 */
  int32_t micro_batch;            /**< --micro-batch; UNSET: the sweep tries 1, 2, 4 and larger powers of two
                                       while a layout of the largest so far fits, a layout takes its mb= */
  const char *layout;             /**< --layout: one layout, e.g. "tp=8,pp=4,dp=32"; NULL: sweep */
  int32_t gpus;                   /**< --gpus; UNSET: every host */
  int32_t gpus_per_node;          /**< --gpus-per-node; UNSET: the platform's */
  int32_t top;                    /**< --top: families shown (10; sp_whatif_family) */
  gboolean all;                   /**< --all: the table lists every layout by step time, fitting or not */
  int32_t simulate;               /**< --simulate: most layouts whose step graph runs (64; 0: closed form) */
  double comm_slowdown;           /**< --comm-slowdown; UNSET: each host's property, else 0.189 */
  const char *fidelity;           /**< --fidelity: "flow" (NULL), "step" or "analytic" */
  double eff_matmul;              /**< --eff-matmul in (0, 1]; -1: the GPU's default */
  double eff_attn;                /**< --eff-attn in (0, 1]; -1: the GPU's default */
  double mem_usable;              /**< --mem-usable in (0, 1]; -1: 0.92 */
  double peak_tflops;             /**< --peak-tflops; UNSET: the platform's host speed, else H100 */
  double gpu_mem_gib;             /**< --gpu-mem; UNSET: the platform's, else 80 */
  const char *attention;          /**< --attention: "flash" (NULL) or "unfused" */
  const char *fp8;                /**< --fp8: FP8 recipe of the layers' linears, "delayed", "tensorwise" or
                                       "blockwise" (sp_fp8_recipe_parse); NULL: the model's dtype */
  const char *gemm_table;         /**< --gemm-table: measured GEMM rates (JSON or CSV), or NULL */
  const char *grad_reduce;        /**< --grad-reduce: "fp32" reduces every layout's gradients over the
                                       data-parallel group in fp32 (layout key dpfp32=1; Megatron-LM's
                                       default with bf16); "model" or NULL: as each layout says */
  const char *routing;            /**< --routing: MoE token routing, "uniform" (NULL), "zipf:S" or FILE
                                       (sp_moe_routing_parse) */
  int32_t corrupt_rank;           /**< testing aid: corrupt an output of this rank after each verify run (-1: off) */
  sp_whatif_report_fn report;     /**< warnings, notes and verify lines (NULL: dropped) */
  sp_whatif_progress_fn progress; /**< after each evaluated layout (may be NULL) */
  void *user;                     /**< passed to report and progress */
  sp_whatif_spread *spread;       /**< the sweep spread over processes; NULL: this process alone */
} sp_whatif_opts;

/** Fill @p o with the defaults. */
void sp_whatif_opts_init(sp_whatif_opts *o);

/**
 * Check the options that need no platform (ranges of --seq, --micro-batch, --top,
 * --simulate, --comm-slowdown, the efficiencies, --peak-tflops, --gpu-mem and the
 * --attention name). @return FALSE with SP_ERROR_INVALID saying which and why.
 */
gboolean sp_whatif_opts_check(const sp_whatif_opts *o, GError **err);

/** What the what-if needs to know of the cluster. */
typedef struct {
  const char *name;       /**< the platform (a file name), for reports */
  int32_t hosts;          /**< hosts of the platform (one GPU each) */
  int32_t gpus_per_node;  /**< GPUs per node, the flag's or the platform's (> 0) */
  int32_t node_gpus;      /**< GPUs per node the platform itself describes (0: unknown); a --gpus-per-node
                               that differs is refused, as the platform's links decide what shares NVLink */
  const char *gpu_model;  /**< `gpu` property ("A100 ..." selects A100 kernels and network), or NULL: H100 SXM */
  double speed;           /**< host speed in flop/s (>= 1e12: the GPU's peak), 0: unknown */
  double gpu_mem;         /**< GPU memory in bytes, 0: unknown */
  double hbm_bw;          /**< GPU memory bandwidth in bytes/s (host property hbm_bw), 0: unknown */
  double measured_gemm_flops; /**< a CPU's GEMM rate measured by `spsim platform local` (> 0: the peak, at
                               efficiency 1), 0: none */
  double measured_attn_flops; /**< its measured attention rate (> 0: attention at this rate), 0: none */
  double measured_attn_bwd_flops; /**< its measured attention backward rate (> 0: the backward at this rate,
                                   else at measured_attn_flops' share of the GPU's backward), 0: none */
  const char *measured_gemm_table; /**< its measured GEMM table (a path), or NULL */
  const char *mixed;      /**< the GPUs used differ: what they are and how they are priced ("mixed cluster:
                               ..."; speed, gpu_mem and hbm_bw are then the slowest and smallest); NULL: alike */
} sp_whatif_platform;

/**
 * An engine: prices collectives on the platform and runs step graphs with contention.
 * Every member may be NULL.
 */
typedef struct {
  /** Load the platform for the job @p c (its GPUs and GPUs per node; the pricer is the
   *  what-if's), once the request is known valid and before the first price. FALSE with
   *  SP_ERROR_UNSUPPORTED: price analytically (a note says why); any other error ends
   *  the what-if. */
  gboolean (*open)(void *user, const sp_step_ctx *c, GError **err);
  /** Price one collective with the engine (after open succeeded). */
  sp_comm_price_fn price;
  /** Run the step graph of @p l and put the outcome in @p r as sp_stepsim_eval does
   *  (@p engine: on the loaded platform, with contention). SP_ERROR_UNSUPPORTED: the
   *  layout keeps its closed form (a note says why). NULL: closed form only. */
  gboolean (*simulate)(void *user, const sp_step_ctx *c, const sp_layout *l, gboolean engine, double slowdown,
                       sp_step_result *r, GError **err);
  /** Compute slowdown while collectives run that simulate() assumes where neither the
   *  options nor the platform give one (for reports). */
  double comm_slowdown;
  /** Optional, for a what-if spread over processes (sp_whatif_spread), so that each
   *  collective is priced once over all processes: while @p on, price() notes the
   *  collectives it has not priced yet and returns 0 for them instead of pricing. */
  void (*note)(void *user, gboolean on);
  /** The collectives noted since note(TRUE), each as @c key_size bytes, then forgotten. */
  GBytes *(*take_noted)(void *user);
  /** Price @p n noted collectives (keys from any process of the same build) into
   *  @p seconds, and keep them. */
  gboolean (*price_keys)(void *user, const void *keys, guint n, double *seconds, GError **err);
  /** Keep @p n prices found by other processes. */
  void (*add_prices)(void *user, const void *keys, const double *seconds, guint n);
  gsize key_size; /**< bytes of one noted collective */
  void *user;
} sp_whatif_engine;

/** One evaluated layout. */
typedef struct {
  sp_step_result r; /**< every figure: step time, closed form, throughput, MFU, breakdown, memory */
  char *label;      /**< short label, "tp8s pp4 dp32 sel" */
  guint family;     /**< index of its family in sp_whatif_result::families */
} sp_whatif_row;

/** Relative step-time tolerance within which layouts of one family are one plan (1 %). */
#define SP_WHATIF_FAMILY_TOL 0.01

/**
 * A family: layouts that differ only in how the data-parallel group is sharded (ISP
 * wp and the ZeRO stage) and whose step times agree within SP_WHATIF_FAMILY_TOL of the
 * family's best. The family key is tp (with or without Megatron SP), sp, cp, pp, vpp,
 * the uneven first/last stage sizes, ckpt and mb (dp follows from them), and whether
 * the layout fits and was simulated. Same-key layouts slower than the tolerance start
 * a further family.
 */
typedef struct {
  guint first;  /**< its best row (index into sp_whatif_result::rows) */
  guint n;      /**< rows in it */
  double t_max; /**< step time of its slowest row (rows[first] has the fastest) */
  char *label;  /**< the best row's label with "X" for what varies: "cp4 wpX dp256 zX" */
} sp_whatif_family;

/** How the what-if ended. */
typedef enum {
  SP_WHATIF_OK = 0,         /**< rows are ranked; rows[0] is the winner */
  SP_WHATIF_NONE_VALID,     /**< no valid layout (rows is empty) */
  SP_WHATIF_LAYOUT_NO_FIT,  /**< the one layout asked for does not fit in memory */
  SP_WHATIF_NONE_FITS       /**< no layout fits: rows are ordered by memory instead */
} sp_whatif_outcome;

/** One `--verify` check: a parallel dimension (or the step graph) run in data mode. */
typedef struct {
  char *name;       /**< "tp-mlp-sp", "ulysses-attention", ..., "step-graph" */
  char *dim;        /**< "tp=8", "sp=2 (2 heads, 1 KV)", ... */
  int32_t degree;   /**< ranks of one group (Ulysses x ring: sp x cp; step graph: stages) */
  int32_t *group;   /**< global ranks of the first group (degree entries) */
  int32_t nranks;   /**< ranks simulated (the group and its siblings) */
  int32_t siblings; /**< groups besides the first */
  gboolean pass;
  int32_t bad_rank; /**< first differing global rank, -1 */
  uint64_t bad_off; /**< its first differing byte */
  double sim_s;     /**< simulated time */
} sp_whatif_check;

/** A what-if's outcome. Read the fields; free with sp_whatif_result_free(). */
typedef struct {
  char *platform;               /**< sp_whatif_platform::name */
  char *mixed;                  /**< sp_whatif_platform::mixed (a header line), or NULL */
  sp_model *model;
  sp_step_ctx ctx;              /**< the step model's inputs (model, seq, batch, GPUs, hardware, pricer) */
  sp_analytic_net net;          /**< the analytic network model (pricing without an engine) */
  const char *peak_src;         /**< where the peak came from ("platform host speed", ...) */
  const char *mem_src;          /**< where the GPU memory came from */
  const char *fidelity;         /**< pricing used: "flow", "step" or "analytic" */
  gboolean engine;              /**< collectives priced and step graphs run on the engine */
  double slowdown;              /**< --comm-slowdown, < 0: the platform's */
  int32_t micro_batch;          /**< as requested (SP_WHATIF_UNSET_INT: swept) */
  int32_t mb_swept;             /**< swept: the largest micro-batch size tried */
  gboolean one_layout;          /**< a --layout, not a sweep */
  gboolean tpsp_default;        /**< the --layout has tp > 1 and no tpsp key: Megatron SP is on by default */
  int32_t top;                  /**< families to show */
  gboolean all;                 /**< --all: every layout shown, by step time */
  int32_t corrupt_rank;         /**< testing aid of --verify (-1: off) */
  gboolean swept;               /**< considered and skipped are set */
  guint64 considered;           /**< sweep candidates */
  guint64 skipped[SP_SKIP_COUNT]; /**< sweep candidates skipped, per reason */
  GArray *rows;                 /**< of sp_whatif_row, ranked (NONE_FITS without --all: by memory) */
  GArray *families;             /**< of sp_whatif_family, in the order of their best rows */
  GArray *shown;                /**< of guint: the rows the table shows, in its order: the best row of each of
                                     the first --top families that fit; --all: every row by step time;
                                     NONE_FITS: the first --top rows by memory; LAYOUT_NO_FIT: the layout */
  guint nfit;                   /**< rows that fit in memory */
  guint nsim;                   /**< rows whose step graph ran */
  guint ndisagree;              /**< of those, rows whose closed form is more than 10 % off */
  double gemm_range[2];         /**< the winner's step time with the GEMM efficiency 10 % lower and 10 % higher
                                     (its step scaled by its closed form's change); 0 when not computed (no
                                     winner that fits, or a measured GEMM table) */
  double mem_cap;               /**< usable bytes per GPU */
  sp_whatif_outcome outcome;
  GArray *checks;               /**< of sp_whatif_check after sp_whatif_verify(), else NULL */
  gboolean verified;            /**< every check passed (TRUE before any) */
  sp_whatif_report_fn report;   /**< from the options */
  void *user;
  sp_whatif_engine eng;         /**< the engine it ran with (zeroes: none) */
  sp_gemm_table *gemm_table;    /**< --gemm-table, loaded (ctx.hw.gpu.table), or NULL */
  double *expert_share;         /**< --routing's token share per expert (ctx.expert_share), or NULL */
  gpointer engine_data;         /**< what the engine keeps for the result's life (its pricer) */
  GDestroyNotify engine_free;   /**< frees engine_data */
} sp_whatif_result;

/**
 * Run a what-if of @p o on @p p: load the model, resolve the hardware (platform,
 * then flags), build the candidates (the layout, checked, or the sweep), open the
 * engine (@p eng may be NULL: analytic pricing, closed form only), evaluate every
 * candidate, run the step graph of those that may win, and rank them.
 * Check @p o with sp_whatif_opts_check() first.
 * @return the result (its outcome may still say that nothing fits), or NULL with
 * @p err: a bad option, model, layout or global batch, or an engine failure.
 */
sp_whatif_result *sp_whatif_evaluate(const sp_whatif_opts *o, const sp_whatif_platform *p, const sp_whatif_engine *eng,
                                     GError **err);

/** Free @p r (NULL is fine). */
void sp_whatif_result_free(sp_whatif_result *r);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(sp_whatif_result, sp_whatif_result_free)

/**
 * The outcome as an error: FALSE with SP_ERROR_LAYOUT (no valid layout) or
 * SP_ERROR_PLATFORM (nothing fits: how much memory the smallest layout needs, and
 * what to change), TRUE for SP_WHATIF_OK.
 */
gboolean sp_whatif_result_ok(const sp_whatif_result *r, GError **err);

/** The winner (rows[0]), or NULL when there are no rows. */
const sp_whatif_row *sp_whatif_winner(const sp_whatif_result *r);

/** Rows of the ranked table (sp_whatif_result::shown): --top families that fit, or
 *  every layout with --all. */
guint sp_whatif_shown(const sp_whatif_result *r);

/* ---------------------------------------------------------------- text */

/**
 * The report's opening lines: model and cluster, GPU and kernel assumptions, how many
 * step graphs ran, the sweep's counts (with @p explain: skipped layouts by reason).
 */
char *sp_whatif_header_text(const sp_whatif_result *r, gboolean explain);
/** The ranked table of the first @p n shown rows with its legend: a family's row
 *  carries its label with "X" for what varies and its count and step-time range. */
char *sp_whatif_table_text(const sp_whatif_result *r, guint n);
/** One paragraph on why the winner wins, against the runner-up (the best layout of the
 *  second family); for a --layout, the same account of that layout ("Layout ...:"). */
char *sp_whatif_explain_text(const sp_whatif_result *r);
/** The winner's dominant term, with the overlap the simulation found and without it. */
char *sp_whatif_explain_terms_text(const sp_whatif_result *r);
/** A faster layout that does not fit, with the term that overflows; NULL if none. */
char *sp_whatif_over_memory_text(const sp_whatif_result *r);

/* ---------------------------------------------------------------- documents */

/**
 * The result as JSON: platform, fidelity, model, hardware, sweep counts, the verify
 * checks when run, and every row with its breakdown. Built with json-glib (strings
 * escaped, counts and byte sizes as integers, other figures to 9 significant digits),
 * one member group per line. @p len (may be NULL) receives the length.
 */
char *sp_whatif_to_json(const sp_whatif_result *r, gsize *len);
/**
 * As sp_whatif_to_json; with @p summary, `layouts` holds only the rows of the table
 * (sp_whatif_shown(): the best layout of each family shown, each with its global
 * `rank`), so the document stays small; `layouts_total` counts every layout either way.
 */
char *sp_whatif_to_json_ex(const sp_whatif_result *r, gboolean summary, gsize *len);
/**
 * The result as CSV (RFC 4180: fields with commas, quotes or line breaks quoted,
 * CRLF line ends): a header row, then one row per layout in ranking order with flat
 * columns: rank, family, label, layout, the layout keys (tp tpsp sp cp wp pp vpp
 * ppfirst pplast dp zero ckpt mb), microbatches, step_s, simulated, closed_form_s,
 * tokens_per_s_per_gpu, mfu, tflops_per_gpu, compute_s, bubble_s, exposed_KIND_s
 * (tp sp isp ring pp dp), mem_PART_bytes (weights grads optim act buffers total) and
 * fits. Figures to 9 significant digits, byte sizes as integers, booleans true/false.
 * @p len (may be NULL) receives the length.
 */
char *sp_whatif_to_csv(const sp_whatif_result *r, gsize *len);
/** A stacked-bar chart (SVG) of the step time of the first @p n shown rows; text XML-escaped. */
char *sp_whatif_to_svg(const sp_whatif_result *r, guint n);

/**
 * The winner as a training framework's configuration: @p framework "megatron"
 * (Megatron-LM command-line flags), "deepspeed" (a DeepSpeed config JSON and
 * Megatron-DeepSpeed flags), "torchtitan" (TOML: [parallelism], [training],
 * [activation_checkpoint]) or "internevo" (its `parallel`, `data` and `model` dicts); then one "# cannot express: ..." line for each part of the
 * layout that framework has no setting for. @return NULL with SP_ERROR_INVALID for
 * another name or a result without rows.
 */
char *sp_whatif_export_text(const sp_whatif_result *r, const char *framework, GError **err);

/**
 * The ranking under variations of the uncertain inputs: GEMM efficiency +-10 %, NIC
 * and NVLink bandwidth +-20 % (the closed form, priced with the analytic model, re-run
 * for the fitting layouts that could overtake the winner and, when it was simulated,
 * were simulated too, as the ranking never sets a closed form alone against a
 * simulated time; each keeps its step time
 * scaled by its closed form's change), and the compute slowdown beside collectives
 * +-50 % (the step graph of the shown layouts re-run). One line per variation with the
 * winner's step time and the best plan under it, then the winner's range and whether
 * another plan wins. @return NULL with SP_ERROR_INVALID when no layout fits, or an
 * engine's error.
 */
char *sp_whatif_sensitivity_text(const sp_whatif_result *r, GError **err);

/* ---------------------------------------------------------------- verify */

/** An engine that runs the `--verify` checks in data mode. */
typedef struct {
  /** Make the platform ready for data-mode runs (may be NULL). */
  gboolean (*prepare)(void *user, GError **err);
  /** Run the programs of @p c, local rank i on the host of global rank @p host_map[i],
   *  calling sp_graph_case_compute for COMPUTE steps; @p seconds: simulated time. */
  gboolean (*run_case)(void *user, sp_graph_case *c, const int32_t *host_map, int32_t world, double *seconds,
                       GError **err);
  /** Run the data-mode replay of a step graph (local rank i on the host of
   *  sp_step_replay_ranks(@p rp)[i]). */
  gboolean (*run_replay)(void *user, sp_step_replay *rp, double *seconds, GError **err);
  void *user;
} sp_whatif_verify_engine;

/**
 * Verify the winner: each parallel dimension of its layout at reduced size (2 tokens
 * per rank, head dim 4, hidden 8, 2 layers) with its sibling groups, then its priced
 * step graph replayed with data, each checked bitwise against the reference. Every
 * check is reported as a SP_WHATIF_VERIFY line as it finishes and kept in r->checks;
 * r->verified says whether all passed. @return FALSE only on errors (a FAIL is a
 * result); a result without rows is SP_ERROR_INVALID.
 */
gboolean sp_whatif_verify(sp_whatif_result *r, const sp_whatif_verify_engine *eng, GError **err);

G_END_DECLS

#endif
