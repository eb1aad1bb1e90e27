/* The winner as a training framework's configuration (spsim/whatif.h): Megatron-LM
 * flags, a DeepSpeed config with Megatron-DeepSpeed's flags, or torchtitan's
 * [parallelism] TOML; and what each framework cannot express. Names from the
 * frameworks' own sources: NVIDIA/Megatron-LM megatron/training/arguments.py,
 * microsoft/Megatron-DeepSpeed megatron/arguments.py (--ds-sequence-parallel-size),
 * DeepSpeed's config JSON (docs/_pages/config-json.md), pytorch/torchtitan
 * torchtitan/config/job_config.py (Parallelism, Training, ActivationCheckpoint),
 * InternLM/InternEvo configs/7B_sft.py (the `parallel`, `data` and `model` dicts and
 * their documented keys). */
#include "config.h"

#include <stdarg.h>
#include <string.h>

#include "spsim/error.h"
#include "spsim/whatif.h"

/* One line of what the framework cannot express. */
static void cannot(GString *no, const char *fmt, ...) G_GNUC_PRINTF(2, 3);
static void cannot(GString *no, const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  g_string_append(no, "# cannot express: ");
  g_string_append_vprintf(no, fmt, ap);
  g_string_append_c(no, '\n');
  va_end(ap);
}

/* A shell flag line, continued with a backslash (trimmed from the last one). */
static void flag(GString *s, const char *fmt, ...) G_GNUC_PRINTF(2, 3);
static void flag(GString *s, const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  g_string_append_vprintf(s, fmt, ap);
  g_string_append(s, " \\\n");
  va_end(ap);
}

static void end_flags(GString *s)
{
  if (g_str_has_suffix(s->str, " \\\n")) g_string_truncate(s, s->len - 3);
  g_string_append_c(s, '\n');
}

static void megatron(GString *s, GString *no, const sp_whatif_result *res, const sp_layout *l)
{
  int64_t layers = res->model->layers;
  flag(s, "--tensor-model-parallel-size %d", l->tp);
  if (l->tp > 1 && l->tp_sp) flag(s, "--sequence-parallel");
  if (l->tp_overlap) flag(s, "--tp-comm-overlap");
  flag(s, "--pipeline-model-parallel-size %d", l->pp);
  if (l->pp > 1 && l->vpp > 1) {
    if (l->pp_first == 0 && l->pp_last == 0 && layers % (l->pp * l->vpp) == 0)
      flag(s, "--num-layers-per-virtual-pipeline-stage %" G_GINT64_FORMAT, layers / (l->pp * l->vpp));
    else
      flag(s, "--num-virtual-stages-per-pipeline-rank %d", l->vpp);
    if (l->vpp_group > 0) flag(s, "--microbatch-group-size-per-virtual-pipeline-stage %d", l->vpp_group);
  }
  if (l->pp_first > 0) flag(s, "--decoder-first-pipeline-num-layers %d", l->pp_first);
  if (l->pp_last > 0) flag(s, "--decoder-last-pipeline-num-layers %d", l->pp_last);
  /* Ulysses is Megatron's all-to-all context parallelism; with a ring, the hierarchical a2a+p2p */
  if (l->sp > 1 || l->cp > 1) flag(s, "--context-parallel-size %d", l->sp * l->cp);
  if (l->sp > 1 && l->cp == 1) flag(s, "--cp-comm-type a2a");
  if (l->sp > 1 && l->cp > 1) {
    flag(s, "--cp-comm-type a2a+p2p");
    flag(s, "--hierarchical-context-parallel-sizes %d %d", l->sp, l->cp);
  }
  if (l->ckpt == SP_CKPT_SELECTIVE) flag(s, "--recompute-granularity selective");
  if (l->ckpt == SP_CKPT_SELECTIVE && l->rmods != 0) { /* Megatron-Core's --recompute-modules, space-separated */
    g_autofree char *rm = sp_rmods_format(l->rmods);
    g_strdelimit(rm, "+", ' ');
    flag(s, "--recompute-modules %s", rm);
  }
  if (l->ckpt == SP_CKPT_FULL) {
    flag(s, "--recompute-granularity full");
    flag(s, "--recompute-method uniform");
    flag(s, "--recompute-num-layers 1");
  }
  if (l->zero >= 1) flag(s, "--use-distributed-optimizer");
  /* expert parallelism (Megatron-Core's arguments for its expert RankGenerator) */
  if (l->ep > 1) flag(s, "--expert-model-parallel-size %d", l->ep);
  if (l->etp > 0) flag(s, "--expert-tensor-parallel-size %d", l->etp);
  if (l->a2a_overlap) flag(s, "--overlap-moe-expert-parallel-comm");
  if (l->ep_flex) { /* DeepEP or HybridEP behind the flex dispatcher (Megatron-Core's arguments.py) */
    flag(s, "--moe-token-dispatcher-type flex");
    flag(s, "--moe-flex-dispatcher-backend hybridep");
  }
  if (l->ep > 1 && res->ctx.model->expert_groups > 0) {
    flag(s, "--moe-router-num-groups %" G_GINT64_FORMAT, res->ctx.model->expert_groups);
    flag(s, "--moe-router-group-topk %" G_GINT64_FORMAT, res->ctx.model->groups_per_token);
  }
  flag(s, "--micro-batch-size %d", l->mb);
  flag(s, "--global-batch-size %" G_GINT64_FORMAT, res->ctx.global_batch);
  flag(s, "--seq-length %" G_GINT64_FORMAT, res->ctx.seq);
  end_flags(s);
  if (l->wp > 1) cannot(no, "wp=%d (ISP weight parallelism is InternEvo's; Megatron-LM has no per-layer weight gathering over the data-parallel group)", l->wp);
  if (l->zero == 2) cannot(no, "zero=2: --use-distributed-optimizer shards the optimizer state (ZeRO-1) and reduce-scatters gradients, but keeps the whole gradient buffer");
  if (l->zero == 3) cannot(no, "zero=3 with these flags: --use-distributed-optimizer is ZeRO-1; sharded weights need Megatron-LM's FSDP options");
  if (l->tp > 1 && !l->tp_sp) g_string_append(s, "# tpsp=0: leave out --sequence-parallel (as above)\n");
}

static void deepspeed(GString *s, GString *no, const sp_whatif_result *res, const sp_layout *l, int64_t microbatches)
{
  g_string_append_printf(s, "# ds_config.json\n{\n  \"train_batch_size\": %" G_GINT64_FORMAT ",\n"
                            "  \"train_micro_batch_size_per_gpu\": %d,\n  \"gradient_accumulation_steps\": %" G_GINT64_FORMAT ",\n"
                            "  \"zero_optimization\": { \"stage\": %d },\n  \"bf16\": { \"enabled\": true }\n}\n",
                         res->ctx.global_batch, l->mb, microbatches, l->zero);
  g_string_append(s, "# Megatron-DeepSpeed flags\n");
  flag(s, "--tensor-model-parallel-size %d", l->tp);
  if (l->tp > 1 && l->tp_sp) flag(s, "--sequence-parallel");
  flag(s, "--pipeline-model-parallel-size %d", l->pp);
  if (l->sp > 1) flag(s, "--ds-sequence-parallel-size %d", l->sp);
  if (l->ckpt == SP_CKPT_SELECTIVE) flag(s, "--recompute-granularity selective");
  if (l->ckpt == SP_CKPT_FULL) flag(s, "--recompute-granularity full");
  flag(s, "--deepspeed --deepspeed_config ds_config.json");
  end_flags(s);
  if (l->tp_overlap) cannot(no, "tpoverlap=1 (Megatron-DeepSpeed has no --tp-comm-overlap; its TP collectives stay exposed)");
  if (l->sp > 1 && l->tp_sp) cannot(no, "Ulysses sp=%d together with Megatron's --sequence-parallel (Megatron-DeepSpeed refuses both)", l->sp);
  if (l->cp > 1) cannot(no, "cp=%d (ring attention is not in DeepSpeed)", l->cp);
  if (l->wp > 1) cannot(no, "wp=%d (ISP weight parallelism is InternEvo's)", l->wp);
  if (l->pp > 1 && l->vpp > 1) cannot(no, "vpp=%d (DeepSpeed's pipeline engine has no interleaved schedule)", l->vpp);
  if (l->pp_first > 0 || l->pp_last > 0) cannot(no, "uneven first/last stages (ppfirst/pplast)");
  if (l->ckpt == SP_CKPT_SELECTIVE && l->rmods != 0)
    cannot(no, "recompute=... (Megatron-DeepSpeed's selective recomputation is the attention core alone)");
  if (l->pp > 1 && l->zero >= 2) cannot(no, "zero=%d with pp=%d (DeepSpeed's pipeline engine takes ZeRO stage 0 or 1)", l->zero, l->pp);
}

static void torchtitan(GString *s, GString *no, const sp_whatif_result *res, const sp_layout *l)
{
  /* FSDP2 shards weights, gradients and optimizer state over data_parallel_shard_degree: ZeRO-3 */
  gboolean shard = l->zero >= 1;
  g_string_append_printf(s, "[parallelism]\ndata_parallel_replicate_degree = %d\ndata_parallel_shard_degree = %d\n"
                            "tensor_parallel_degree = %d\ncontext_parallel_degree = %d\npipeline_parallel_degree = %d\n",
                         shard ? 1 : l->dp, shard ? l->dp : 1, l->tp, l->cp, l->pp);
  if (l->pp > 1)
    g_string_append_printf(s, "pipeline_parallel_schedule = \"%s\"\npipeline_parallel_microbatch_size = %d\n",
                           l->vpp > 1 ? "Interleaved1F1B" : "1F1B", l->mb);
  int64_t layers = res->model->layers, chunks = (int64_t)l->pp * (l->vpp > 1 ? l->vpp : 1);
  if (l->pp > 1 && l->pp_first == 0 && l->pp_last == 0 && layers % chunks == 0)
    g_string_append_printf(s, "pipeline_parallel_layers_per_stage = %" G_GINT64_FORMAT "\n", layers / chunks);
  g_string_append_printf(s, "\n[training]\nlocal_batch_size = %" G_GINT64_FORMAT "\nglobal_batch_size = %" G_GINT64_FORMAT
                            "\nseq_len = %" G_GINT64_FORMAT "\n\n[activation_checkpoint]\nmode = \"%s\"\n",
                         l->pp > 1 ? res->ctx.global_batch / l->dp : l->mb, res->ctx.global_batch, res->ctx.seq,
                         sp_ckpt_name(l->ckpt));
  if (l->zero == 1 || l->zero == 2)
    cannot(no, "zero=%d: FSDP2 (data_parallel_shard_degree) shards the weights too, as ZeRO-3", l->zero);
  if (l->sp > 1) cannot(no, "sp=%d (Ulysses all-to-all is not in torchtitan; context_parallel_degree is ring attention)", l->sp);
  if (l->ckpt == SP_CKPT_SELECTIVE && l->rmods != 0)
    cannot(no, "recompute=... (Megatron-Core's modules; torchtitan's selective mode is per op or per layer)");
  if (l->wp > 1) cannot(no, "wp=%d (ISP weight parallelism is InternEvo's)", l->wp);
  if (l->tp > 1 && !l->tp_sp) cannot(no, "tpsp=0 (torchtitan's tensor-parallel plan shards the norms over the sequence)");
  if (l->pp_first > 0 || l->pp_last > 0) cannot(no, "uneven first/last stages as sizes (ppfirst/pplast): list module_fqns_per_model_part by hand");
  if (l->vpp_group > 0) cannot(no, "vppgroup=%d (Megatron-Core's micro-batch groups of the interleaved schedule)", l->vpp_group);
}

/* InternEvo: tensor mode mtp (Megatron TP), msp (with Megatron sequence parallelism)
 * or isp (Intern sequence parallelism: the sequence all-to-all of Ulysses over the
 * tensor group, with weight parallelism); zero1 size -1 shards the optimizer over the
 * data-parallel group, 1 keeps it whole; interleaving is the model's num_chunks. */
static void internevo(GString *s, GString *no, const sp_whatif_result *res, const sp_layout *l, int64_t microbatches)
{
  gboolean isp = l->sp > 1 || l->wp > 1;
  int32_t tensor = isp ? l->sp : l->tp;
  const char *mode = isp ? "isp" : l->tp > 1 && l->tp_sp ? "msp" : "mtp";
  g_string_append_printf(s, "parallel = dict(\n    zero1=dict(size=%d),\n    tensor=dict(size=%d, mode=\"%s\"),\n"
                            "    pipeline=dict(size=%d, interleaved_overlap=True),\n"
                            "    weight=dict(size=%d, overlap=True, memory_pool=True),\n)\n",
                         l->zero >= 1 ? -1 : 1, tensor, mode, l->pp, l->wp);
  g_string_append_printf(s, "data = dict(seq_len=%" G_GINT64_FORMAT ", micro_num=%" G_GINT64_FORMAT ", micro_bsz=%d)\n",
                         res->ctx.seq, microbatches, l->mb);
  g_string_append_printf(s, "model = dict(checkpoint=%s, num_chunks=%d)\n", l->ckpt == SP_CKPT_FULL ? "True" : "False",
                         l->pp > 1 && l->vpp > 1 ? l->vpp : 1);
  if (isp && l->tp > 1)
    cannot(no, "tp=%d together with sp=%d or wp=%d (InternEvo's tensor group runs one mode: mtp/msp or isp)", l->tp,
           l->sp, l->wp);
  if (l->cp > 1) cannot(no, "cp=%d (ring attention: InternEvo's sequence_2D options of recent versions, set by hand)", l->cp);
  if (l->zero >= 2)
    cannot(no, "zero=%d (InternEvo's hybrid ZeRO shards the optimizer state: zero1; FSDP is a separate option)", l->zero);
  if (l->ckpt == SP_CKPT_SELECTIVE || l->ckpt == SP_CKPT_OP)
    cannot(no, "ckpt=%s (model.checkpoint recomputes whole layers: True or a fraction of them)", sp_ckpt_name(l->ckpt));
  if (l->tp > 1 && !isp && !l->tp_sp) g_string_append(s, "# tpsp=0: mode \"mtp\" (as above)\n");
  if (l->pp_first > 0 || l->pp_last > 0) cannot(no, "uneven first/last stages (ppfirst/pplast)");
}

char *sp_whatif_export_text(const sp_whatif_result *r, const char *framework, GError **err)
{
  const sp_whatif_row *w = sp_whatif_winner(r);
  if (w == NULL) {
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "--export: there is no layout to export");
    return NULL;
  }
  const sp_layout *l = &w->r.layout;
  g_autoptr(GString) s = g_string_new(""), no = g_string_new("");
  g_autofree char *spec = sp_layout_to_string(l);
  const char *what;
  if (strcmp(framework, "megatron") == 0) what = "Megatron-LM flags (megatron/training/arguments.py)";
  else if (strcmp(framework, "deepspeed") == 0) what = "a DeepSpeed config and Megatron-DeepSpeed flags";
  else if (strcmp(framework, "torchtitan") == 0) what = "torchtitan TOML (torchtitan/config/job_config.py)";
  else if (strcmp(framework, "internevo") == 0) what = "InternEvo's config dicts (configs/7B_sft.py)";
  else {
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "--export must be megatron, deepspeed, torchtitan or internevo (got '%s')", framework);
    return NULL;
  }
  g_string_append_printf(s, "# spsim: %s (%s) on %d GPUs as %s\n", w->label, spec, r->ctx.world, what);
  if (strcmp(framework, "megatron") == 0) megatron(s, no, r, l);
  else if (strcmp(framework, "deepspeed") == 0) deepspeed(s, no, r, l, w->r.microbatches);
  else if (strcmp(framework, "torchtitan") == 0) torchtitan(s, no, r, l);
  else internevo(s, no, r, l, w->r.microbatches);
  g_string_append(s, no->str);
  return g_string_free(g_steal_pointer(&s), FALSE);
}
