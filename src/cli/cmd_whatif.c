/* spsim PLATFORM.xml: what-if analysis. Ranks the parallel layouts of a model on a
 * cluster by predicted step time, with memory per GPU and exposed communication.
 * The front end only: flags to sp_whatif_opts, the what-if run by the library
 * (spsim/whatif.h, on the SimGrid engine through whatif_sim.h), its text printed and
 * its documents written. */
#include "config.h"

#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "spsim/error.h"
#include "spsim/whatif.h"
#include "platform.h"
#include "whatif_sim.h"

#define GIB (1024.0 * 1024.0 * 1024.0)

/* Where the text report goes: standard error when an artefact is written to
 * standard output, so that `--json - | jq` reads JSON only. */
static FILE *text_out;

/* A document to its file, or to standard output for "-". */
static gboolean write_out(const char *path, const char *flag, const char *text, gsize len, GError **err)
{
  if (strcmp(path, "-") == 0) {
    if (fwrite(text, 1, len, stdout) != len || fflush(stdout) != 0) {
      g_set_error(err, SP_ERROR, SP_ERROR_IO, "cannot write %s to standard output", flag);
      return FALSE;
    }
    return TRUE;
  }
  GError *ferr = NULL;
  if (!g_file_set_contents(path, text, (gssize)len, &ferr)) {
    g_set_error(err, SP_ERROR, SP_ERROR_IO, "cannot write %s file: %s", flag, ferr->message);
    g_error_free(ferr);
    return FALSE;
  }
  return TRUE;
}

/* An output file's folder must exist and take new files, and the path must not be a
 * folder: checked before the sweep, so that a long run does not end in an error it could
 * have given at once ("-" is standard output). */
static gboolean check_out(const char *path, const char *flag, GError **err)
{
  if (path == NULL || strcmp(path, "-") == 0) return TRUE;
  g_autofree char *dir = g_path_get_dirname(path);
  const char *why = NULL;
  if (*path == '\0') why = "is empty";
  else if (g_file_test(path, G_FILE_TEST_IS_DIR)) why = "is a folder";
  else if (!g_file_test(dir, G_FILE_TEST_IS_DIR)) why = "is in a folder that does not exist";
  else if (access(dir, W_OK | X_OK) != 0) why = "is in a folder this user cannot write to";
  if (why == NULL) return TRUE;
  g_set_error(err, SP_ERROR, SP_ERROR_IO, "%s '%s' %s; give a file in an existing, writable folder (or - for standard output)",
              flag, path, why);
  return FALSE;
}

/* --json-full: --json writes every evaluated layout, not only the table's rows */
static gboolean json_full;

static gboolean write_json(const sp_whatif_result *r, const char *path, GError **err)
{
  gsize len = 0;
  g_autofree char *text = sp_whatif_to_json_ex(r, !json_full, &len);
  return write_out(path, "--json", text, len, err);
}

static gboolean write_csv(const sp_whatif_result *r, const char *path, GError **err)
{
  gsize len = 0;
  g_autofree char *text = sp_whatif_to_csv(r, &len);
  return write_out(path, "--csv", text, len, err);
}

static gboolean write_svg(const sp_whatif_result *r, const char *path, GError **err)
{
  g_autofree char *text = sp_whatif_to_svg(r, sp_whatif_shown(r));
  return write_out(path, "--svg", text, strlen(text), err);
}

static void print_text(char *text)
{
  fputs(text, text_out);
  g_free(text);
}

/* Warnings and notes on standard error; the verify report with the text, as it runs. */
static void report(void *user, sp_whatif_msg kind, const char *text)
{
  (void)user;
  if (kind == SP_WHATIF_VERIFY) {
    fprintf(text_out, "%s\n", text);
    fflush(text_out);
  } else {
    fprintf(stderr, "spsim: %s: %s\n", kind == SP_WHATIF_WARNING ? "warning" : "note", text);
  }
}

static void progress(void *user, guint done, guint total)
{
  if (!GPOINTER_TO_INT(user) || total == 0) return;
  if (done != total && done % 2048 != 0) return;
  int w = 40, f = (int)((double)done / total * w);
  fprintf(stderr, "\r[%.*s%*s] %u/%u layouts", f, "########################################", w - f, "", done, total);
  if (done == total) fputs("\r\033[K", stderr);
}

/* Built-in models: the source tree's and the installed ones (spsim/model.h). */
static char **model_dirs(void)
{
#ifndef SP_SRC_MODELS_DIR
#define SP_SRC_MODELS_DIR NULL
#endif
#ifndef SP_MODELS_DIR
#define SP_MODELS_DIR NULL
#endif
  return sp_model_search_dirs(SP_SRC_MODELS_DIR, SP_MODELS_DIR);
}

/* The report of a what-if that ran: opening lines, the ranked table and why the winner
 * wins, or what did not fit; --verify; the documents. */
static int report_result(sp_whatif_result *r, const char *json, const char *csv, const char *export, const char *svg, const char *trace, gboolean explain,
                         gboolean verify, gboolean sensitivity, GError **err)
{
  print_text(sp_whatif_header_text(r, explain));
  if (r->outcome == SP_WHATIF_NONE_VALID) {
    sp_whatif_result_ok(r, err);
    return 1;
  }
  fprintf(text_out, "\n");
  /* A --layout that does not fit is still priced: its explanation says where the memory
   * goes, and what was asked of it (--verify, the documents) runs; it exits 1 either way,
   * after one line on standard error that says so. */
  gboolean no_fit = r->outcome == SP_WHATIF_LAYOUT_NO_FIT;
  g_autoptr(GError) fit_err = NULL;
  if (no_fit) sp_whatif_result_ok(r, &fit_err);
  if (r->outcome == SP_WHATIF_NONE_FITS) {
    fprintf(text_out, "%s does not fit in %.1f GiB per GPU%s with any layout; %s:\n", r->model->name, r->mem_cap / GIB,
            r->mixed ? " (the smallest GPU of this mixed cluster)" : "",
            r->all ? "every layout by step time" : "the closest layouts by memory");
    print_text(sp_whatif_table_text(r, sp_whatif_shown(r)));
    sp_whatif_result_ok(r, err);
    GError *jerr = NULL;
    if (json && !write_json(r, json, &jerr)) g_clear_error(&jerr);
    if (csv && !write_csv(r, csv, &jerr)) g_clear_error(&jerr);
    return 1;
  }
  print_text(sp_whatif_table_text(r, no_fit ? 1 : sp_whatif_shown(r)));
  g_autofree char *why = sp_whatif_explain_text(r);
  fprintf(text_out, "\n%s\n", why);
  if (explain) {
    g_autofree char *terms = sp_whatif_explain_terms_text(r);
    fprintf(text_out, "%s\n", terms);
  }
  g_autofree char *over = sp_whatif_over_memory_text(r); /* a faster layout that does not fit is worth knowing about */
  if (over) fprintf(text_out, "%s\n", over);
  if (sensitivity && no_fit) {
    fprintf(text_out, "\n--sensitivity: not run, it re-ranks layouts that fit and this one does not.\n");
  } else if (sensitivity) {
    g_autofree char *sens = sp_whatif_sensitivity_text(r, err);
    if (sens == NULL) return 1;
    fprintf(text_out, "\n%s", sens);
  }
  if (export) {
    g_autofree char *cfg = sp_whatif_export_text(r, export, err);
    if (cfg == NULL) return 1;
    fprintf(text_out, "\n%s", cfg);
  }
  if (verify && !sp_whatif_run_verify(r, err)) return 1;
  if (json && !write_json(r, json, err)) return 1;
  if (csv && !write_csv(r, csv, err)) return 1;
  if (svg && !write_svg(r, svg, err)) return 1;
  if (trace && !sp_whatif_write_trace(r, trace, err)) return 1;
  if (no_fit) {
    g_propagate_error(err, g_steal_pointer(&fit_err));
    return 1;
  }
  return r->verified ? 0 : SP_CLI_EXIT_MISMATCH;
}

/* The end of --help: what the output means and the exit status. */
static const char help_text[] =
  "Layout keys (--layout tp=8,pp=4,dp=32,zero=1,ckpt=selective; tp x sp x cp x pp x dp = GPUs):\n"
  "  tp=N      tensor parallelism (Megatron-LM), inside one node\n"
  "  tpsp=0|1  Megatron sequence parallelism with tp: norms and dropout split over the sequence, all-gather/\n"
  "            reduce-scatter instead of all-reduce; on by default when tp > 1 (the output says so)\n"
  "  tpoverlap=0|1  TP all-gathers/reduce-scatters overlapped with the GEMMs beside them in chunks\n"
  "            (Megatron-LM --tp-comm-overlap, Transformer Engine userbuffers); needs tp > 1 and tpsp=1;\n"
  "            the sweep turns it on with tpsp\n"
  "  sp=N      Ulysses sequence parallelism (DeepSpeed-Ulysses): heads all-to-all around attention\n"
  "  cp=N      context parallelism: ring attention over the sequence (Megatron-LM --context-parallel-size)\n"
  "  wp=N      ISP weight parallelism (InternEvo): weights sharded over the data-parallel ranks, gathered per layer\n"
  "  pp=N      pipeline stages (1F1B); vpp=V virtual stages per rank (interleaved 1F1B);\n"
  "            vppgroup=G: the interleaved schedule's micro-batches in groups of G (Megatron-Core's\n"
  "            --microbatch-group-size-per-virtual-pipeline-stage, default pp);\n"
  "            ppfirst=L, pplast=L layers on the first/last stage\n"
  "  dp=N      data parallelism (replicas); dpsync=1: gradients reduced after the backward in one\n"
  "            collective; dpfp32=1: gradients reduced in fp32 (Megatron-LM with bf16, FSDP2 reduce_dtype)\n"
  "  zero=0..3 ZeRO stage over the data-parallel group (1: optimizer, 2: + gradients, 3: + weights)\n"
  "  ckpt=none|selective|full  activation recomputation; recompute=M+M: with selective, the modules\n"
  "            (Megatron-Core's --recompute-modules: core_attn, the default; layernorm, mla_up_proj, mlp, moe_act)\n"
  "  mb=N      micro-batch size in sequences\n"
  "  ep=N, etp=N  MoE: expert parallelism, expert tensor parallelism (tp or 1); a2aoverlap=1: the expert\n"
  "            all-to-alls overlap the compute of a paired micro-batch (Megatron-Core's combined 1F1B)\n"
  "\n"
  "The table shows the best layout of each family: layouts that differ only in ISP wp or the ZeRO\n"
  "stage and whose step times agree within 1%, with X for what varies (--all: every layout).\n"
  "\n"
  "The layouts and their step graphs are spread over the processors of this machine (-j N processes;\n"
  "-j 1: one), or under mpirun (mpirun -np N spsim PLATFORM.xml ...) over the N ranks; the first process\n"
  "prints the report and writes the files, the same bytes as one process, and the others print nothing.\n"
  "\n"
  "Exit status: 0 when at least one layout fits in memory (a --layout: when it fits), 1 when none\n"
  "fits (with or without --all), when --verify finds a mismatch, or on an error. A --layout that does\n"
  "not fit is still reported: its row, its explanation, --verify (memory plays no part in it), --export\n"
  "and the files asked for (--json/--csv say fits: false); --sensitivity says it does not apply.\n";

/* Memory one what-if process holds per GPU of the platform, with room: the default
 * sweep of llama3-405b peaks at 0.92 GiB on 16,384 GPUs (under the 2 GiB floor) and 2.2
 * GiB on 131,072 (17.5 KiB per GPU; 1.7 GiB per process with -j 2) since large groups are
 * priced on their line (bench/RESULTS.md, "Large groups on a line"): 32 KiB per GPU is
 * 4 GiB there. */
#define WHATIF_BYTES_PER_GPU ((guint64)32 << 10)

/* The default -j: one process per processor, as many as available memory holds for
 * the platform's size; one when the platform cannot be read (the what-if then says
 * why). */
static int32_t auto_jobs(const char *xml)
{
  if (sp_cli_jobs_auto(0) <= 1) return 1; /* one processor, or little memory: no need to read it */
  sp_plat_desc *d = sp_plat_read(xml, NULL);
  if (d == NULL) return 1;
  guint64 need = (guint64)d->names->len * WHATIF_BYTES_PER_GPU;
  sp_plat_desc_free(d);
  return sp_cli_jobs_auto(need);
}

int sp_cmd_whatif(int argc, char **argv)
{
  sp_whatif_opts o;
  sp_whatif_opts_init(&o);
  char *json = NULL, *trace = NULL, *svg = NULL, *csv = NULL, *export = NULL;
  gboolean explain = FALSE, verify = FALSE, sensitivity = FALSE;
  gint jobs = 0, kill_worker = 0;
  GOptionEntry entries[] = {
    { "model", 'm', 0, G_OPTION_ARG_STRING, &o.model, "built-in model name or FILE.json (default: llama3-70b from 128 GPUs, llama3-8b below)", "NAME" },
    { "seq", 's', 0, G_OPTION_ARG_INT64, &o.seq, "sequence length in tokens (default 8192)", "N" },
    { "global-batch", 'b', 0, G_OPTION_ARG_STRING, &o.global_batch, "sequences per step, or tokens with a suffix: 4M (x 2^20), 8192tok (default 1024 sequences)", "N" },
    { "micro-batch", 0, 0, G_OPTION_ARG_INT, &o.micro_batch, "micro-batch size in sequences (default: the sweep tries 1, 2 and 4; a --layout without mb= takes 1)", "N" },
    { "layout", 'l', 0, G_OPTION_ARG_STRING, &o.layout, "evaluate one layout, e.g. tp=8,pp=4,dp=32,zero=1,ckpt=selective (default: sweep)", "SPEC" },
    { "gpus", 'g', 0, G_OPTION_ARG_INT, &o.gpus, "GPUs to use (default: every host of the platform)", "N" },
    { "gpus-per-node", 0, 0, G_OPTION_ARG_INT, &o.gpus_per_node, "GPUs per node, for a platform that does not say (default: the platform's gpus_per_node property or its node zones; a different value is refused)", "N" },
    { "top", 'k', 0, G_OPTION_ARG_INT, &o.top, "rows of the ranked table: families of layouts differing only in wp or zero within 1% count once (default 10)", "K" },
    { "all", 0, 0, G_OPTION_ARG_NONE, &o.all, "list every layout, fitting or not, by step time instead of the best of each family; the exit status is still 1 when none fits", NULL },
    { "json", 0, 0, G_OPTION_ARG_FILENAME, &json, "write the table's rows (every layout with --all or --json-full) with their breakdown", "FILE" },
    { "json-full", 0, 0, G_OPTION_ARG_NONE, &json_full, "--json writes every evaluated layout (about 27 MB for the default sweep) instead of the table's rows", NULL },
    { "csv", 0, 0, G_OPTION_ARG_FILENAME, &csv, "write every evaluated layout as one CSV row (RFC 4180): layout keys, step, throughput, MFU, exposed communication per kind, bubble, memory parts, fits", "FILE" },
    { "sensitivity", 0, 0, G_OPTION_ARG_NONE, &sensitivity, "re-rank under GEMM efficiency +-10%, NIC and NVLink bandwidth +-20% (closed form) and the compute slowdown beside collectives +-50% (step graph of the shown layouts): the winner's step-time range and whether another plan wins", NULL },
    { "export", 0, 0, G_OPTION_ARG_STRING, &export, "print the winner as megatron (Megatron-LM flags), deepspeed (DeepSpeed config and Megatron-DeepSpeed flags), torchtitan (TOML) or internevo (its parallel/data/model dicts), with what that framework cannot express", "FRAMEWORK" },
    { "trace", 0, 0, G_OPTION_ARG_FILENAME, &trace, "write the winner's simulated step as a Chrome trace: every task of every stage's streams", "FILE" },
    { "simulate", 0, 0, G_OPTION_ARG_INT, &o.simulate, "simulate the step graph of the layouts within 10% of the best closed form, at most N (default 64; 0: closed form only)", "N" },
    { "comm-slowdown", 0, 0, G_OPTION_ARG_DOUBLE, &o.comm_slowdown, "compute slowdown while a collective runs on the GPU (default: platform property comm_slowdown, else 0.189)", "F" },
    { "svg", 0, 0, G_OPTION_ARG_FILENAME, &svg, "write a stacked-bar chart of the top layouts", "FILE" },
    { "explain", 0, 0, G_OPTION_ARG_NONE, &explain, "count skipped layouts per reason, and name the winner's dominant term with and without overlap", NULL },
    { "fidelity", 0, 0, G_OPTION_ARG_STRING, &o.fidelity, "collective pricing: flow (SimGrid, default), step (SimGrid step by step), analytic", "MODE" },
    { "eff-matmul", 0, 0, G_OPTION_ARG_DOUBLE, &o.eff_matmul, "fraction of peak of large GEMMs, before tile and wave quantisation (default: H100 and B200 0.74, A100 0.70)", "F" },
    { "eff-attn", 0, 0, G_OPTION_ARG_DOUBLE, &o.eff_attn, "fraction of peak of the flash-attention forward; the backward keeps its ratio to it (default: H100 0.60, A100 0.65)", "F" },
    { "attention", 0, 0, G_OPTION_ARG_STRING, &o.attention, "attention kernel: flash (fused, the GPU's best: FlashAttention-3/cuDNN on H100; default), flash2 (a FlashAttention-2-generation kernel: FA2, PyTorch SDPA's flash backend), triton (the Triton FlashAttention of 2022 that llm-foundry's attn_impl triton runs: flash2 / 1.4 forward, / 2 backward) or unfused (batched GEMMs over s^2 scores + softmax/dropout traffic)", "IMPL" },
    { "fp8", 0, 0, G_OPTION_ARG_STRING, &o.fp8, "train the layers' linears (QKV, projection, MLP, experts) in FP8 as Transformer Engine does (Megatron-LM --fp8-format hybrid --fp8-recipe RECIPE): delayed, tensorwise or blockwise (DeepSeek-V3's 1x128/128x128 scaling); embedding, LM head, attention, router and norms stay 16-bit; H100/H200/B200 only" , "RECIPE" },
    { "grad-reduce", 0, 0, G_OPTION_ARG_STRING, &o.grad_reduce, "gradients reduced over the data-parallel group in fp32 for every layout (fp32: the layout key dpfp32=1, Megatron-LM's default with bf16: --accumulate-allreduce-grads-in-fp32) or as each layout says (model, the default)", "fp32|model" },
    { "gemm-table", 0, 0, G_OPTION_ARG_FILENAME, &o.gemm_table, "measured GEMM rates replacing the GEMM model: JSON [{m,n,k,tflops[,dtype]}] or CSV with columns m,n,k,tflops[,dtype]; rows of dtype fp8 price the FP8 GEMMs of --fp8", "FILE" },
    { "peak-tflops", 0, 0, G_OPTION_ARG_DOUBLE, &o.peak_tflops, "dense bf16 peak per GPU (default: platform host speed)", "T" },
    { "gpu-mem", 0, 0, G_OPTION_ARG_DOUBLE, &o.gpu_mem_gib, "GPU memory in GiB (default: platform property, else 80)", "GIB" },
    { "mem-usable", 0, 0, G_OPTION_ARG_DOUBLE, &o.mem_usable, "usable fraction of GPU memory (default 0.92)", "F" },
    { "verify", 0, 0, G_OPTION_ARG_NONE, &verify, "run the chosen layout's parallel dimensions in data mode at reduced size on the platform and report PASS/FAIL", NULL },
    { "routing", 0, 0, G_OPTION_ARG_STRING, &o.routing, "MoE token routing: uniform (default), zipf:S (expert popularity "
      "~ 1/rank^S, the popular experts on the first EP rank) or FILE (JSON list of per-expert token shares); the busiest "
      "EP rank sets the pace", "MODEL" },
    { "jobs", 'j', 0, G_OPTION_ARG_INT, &jobs, "processes of this machine that share the sweep, as mpirun's ranks do (the same output, byte for byte; default 0: one per processor, as many as available memory holds at 2 GiB or 32 KiB per GPU of the platform each; 1: this process alone)", "N" },
    { "lenient", 0, 0, G_OPTION_ARG_NONE, &o.lenient, "warn about unknown keys in the model file and unknown host properties in the platform instead of refusing them", NULL },
    { "debug-kill-worker", 0, G_OPTION_FLAG_HIDDEN, G_OPTION_ARG_INT, &kill_worker, "testing aid: -j's worker process K dies (SIGKILL) before its first exchange", "K" },
    { "debug-corrupt-rank", 0, G_OPTION_FLAG_HIDDEN, G_OPTION_ARG_INT, &o.corrupt_rank, "testing aid: corrupt an output of global rank R after each --verify run", "R" },
    { NULL, 0, 0, 0, NULL, NULL, NULL },
  };
  GError *err = NULL;
  int rc = 1;
  GOptionContext *octx = g_option_context_new("PLATFORM.xml - rank the parallel layouts of a model on a cluster");
  g_option_context_add_main_entries(octx, entries, NULL);
  g_option_context_set_description(octx, help_text);
  g_option_context_set_help_enabled(octx, TRUE);
  char **dirs = model_dirs();
  sp_whatif_result *r = NULL;
  sp_whatif_spread *spread = NULL;
  text_out = stdout;
  /* under mpirun the layouts are spread over the ranks; rank 0 reports, the others stay
   * silent (even about a bad flag: rank 0 says it) */
  if (!sp_cli_spread_open(&spread, &err)) goto out;
  if (!g_option_context_parse(octx, &argc, &argv, &err)) goto out;
  if (argc != 2) {
    err = g_error_new(G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE, "expected exactly one platform file (got %d arguments; see spsim --help)", argc - 1);
    goto out;
  }
  int to_stdout = (json && strcmp(json, "-") == 0) + (csv && strcmp(csv, "-") == 0) + (svg && strcmp(svg, "-") == 0) + (trace && strcmp(trace, "-") == 0);
  if (to_stdout > 1) {
    err = g_error_new(SP_ERROR, SP_ERROR_INVALID, "only one of --json, --csv, --svg and --trace can write to standard output (-)");
    goto out;
  }
  if (to_stdout == 1) text_out = stderr; /* the report moves aside: stdout carries the artefact alone */
  if (!check_out(json, "--json", &err) || !check_out(csv, "--csv", &err) || !check_out(svg, "--svg", &err) ||
      !check_out(trace, "--trace", &err))
    goto out;
  if (jobs < 0 || jobs > SP_CLI_JOBS_MAX) {
    err = g_error_new(SP_ERROR, SP_ERROR_INVALID, "-j/--jobs %d: processes from 1 to %d, or 0 for one per processor", jobs, SP_CLI_JOBS_MAX);
    goto out;
  }
  if (spread != NULL && jobs > 1) {
    err = g_error_new(SP_ERROR, SP_ERROR_INVALID, "-j/--jobs %d under mpirun: the what-if is already spread over mpirun's ranks "
                      "(give mpirun more ranks instead)", jobs);
    goto out;
  }
  /* the sweep spread over this machine's processors (one --layout: nothing to share) */
  if (spread == NULL && o.layout == NULL && !sp_cli_jobs_open(jobs == 0 ? auto_jobs(argv[1]) : jobs, &spread, &err)) goto out;
  if (kill_worker > 0 && spread != NULL && spread->rank == kill_worker) raise(SIGKILL);
  o.model_dirs = (const char *const *)dirs;
  o.report = report;
  o.progress = progress;
  o.user = GINT_TO_POINTER(isatty(2));
  if (spread != NULL && spread->rank > 0) {
    o.spread = spread;
    o.report = NULL;
    o.progress = NULL;
    r = sp_whatif_run(&o, argv[1], &err);
    if (r != NULL) rc = 0;
    goto out;
  }
  o.spread = spread;
  r = sp_whatif_run(&o, argv[1], &err);
  if (spread != NULL && r != NULL) {
    sp_cli_spread_close(spread, 0); /* the others are done: the report is this process's alone */
    spread = NULL;
  }
  if (r != NULL) rc = report_result(r, json, csv, export, svg, trace, explain, verify, sensitivity, &err);
out:
  if (err != NULL) {
    g_autofree char *why = g_strdup(err->message);
    if (spread != NULL && spread->rank > 0) {
      rc = err->domain == G_OPTION_ERROR ? 2 : 1; /* sp_cli_fail's status, without its line */
      g_clear_error(&err);
    } else {
      rc = sp_cli_fail(err);
    }
    sp_cli_spread_failed(spread, why); /* after rank 0's line */
  }
  sp_cli_spread_close(spread, rc);
  sp_whatif_result_free(r);
  g_strfreev(dirs);
  g_option_context_free(octx);
  g_free((char *)o.model); g_free((char *)o.layout); g_free((char *)o.global_batch); g_free((char *)o.fidelity);
  g_free((char *)o.attention); g_free((char *)o.fp8); g_free((char *)o.gemm_table); g_free((char *)o.grad_reduce);
  g_free(json); g_free(trace); g_free(svg); g_free(csv); g_free(export);
  return rc;
}
