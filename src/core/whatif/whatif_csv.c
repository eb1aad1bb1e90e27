/* The what-if's layouts as a CSV table (spsim/whatif.h), one row per layout in ranking
 * order, flat columns, written with base/csv_out.c. */
#include "config.h"

#include "csv_out.h"
#include "spsim/whatif.h"

static const char *const columns[] = {
  "rank", "family", "label", "layout", "tp", "tpsp", "sp", "cp", "wp", "pp", "vpp", "ppfirst", "pplast", "dp", "zero", "ckpt",
  "mb", "microbatches", "step_s", "simulated", "closed_form_s", "tokens_per_s_per_gpu", "mfu", "tflops_per_gpu",
  "compute_s", "bubble_s", "exposed_tp_s", "exposed_sp_s", "exposed_isp_s", "exposed_ring_s", "exposed_pp_s",
  "exposed_dp_s", "mem_weights_bytes", "mem_grads_bytes", "mem_optim_bytes", "mem_act_bytes", "mem_buffers_bytes",
  "mem_total_bytes", "fits", "vppgroup", "ep", "etp", "a2aoverlap", "dispatcher", "recompute", NULL
};

/* the six exposed_*_s columns follow sp_comm_kind's order */
G_STATIC_ASSERT(SP_COMM_KIND_COUNT == 6);

char *sp_whatif_to_csv(const sp_whatif_result *res, gsize *len)
{
  sp_csv c = { .s = g_string_new("") };
  for (guint k = 0; columns[k] != NULL; k++) sp_csv_str(&c, columns[k]);
  sp_csv_end_row(&c);
  for (guint i = 0; i < res->rows->len; i++) {
    const sp_whatif_row *row = &g_array_index(res->rows, sp_whatif_row, i);
    const sp_step_result *r = &row->r;
    const sp_layout *l = &r->layout;
    g_autofree char *ls = sp_layout_to_string(l);
    sp_csv_printf(&c, "%u", i + 1);
    sp_csv_printf(&c, "%u", row->family + 1);
    sp_csv_str(&c, row->label);
    sp_csv_str(&c, ls);
    sp_csv_printf(&c, "%d", l->tp);
    sp_csv_printf(&c, "%d", l->tp_sp ? 1 : 0);
    sp_csv_printf(&c, "%d", l->sp);
    sp_csv_printf(&c, "%d", l->cp);
    sp_csv_printf(&c, "%d", l->wp);
    sp_csv_printf(&c, "%d", l->pp);
    sp_csv_printf(&c, "%d", l->vpp > 1 ? l->vpp : 1);
    sp_csv_printf(&c, "%d", l->pp_first);
    sp_csv_printf(&c, "%d", l->pp_last);
    sp_csv_printf(&c, "%d", l->dp);
    sp_csv_printf(&c, "%d", l->zero);
    sp_csv_str(&c, sp_ckpt_name(l->ckpt));
    sp_csv_printf(&c, "%d", l->mb);
    sp_csv_printf(&c, "%" G_GINT64_FORMAT, r->microbatches);
    sp_csv_num(&c, r->step_time);
    sp_csv_str(&c, r->simulated ? "true" : "false");
    sp_csv_num(&c, r->closed_form);
    sp_csv_num(&c, r->tokens_per_s / res->ctx.world);
    sp_csv_num(&c, r->mfu);
    sp_csv_num(&c, r->tflops);
    sp_csv_num(&c, r->compute);
    sp_csv_num(&c, r->bubble);
    for (int k = 0; k < SP_COMM_KIND_COUNT; k++) sp_csv_num(&c, r->exposed[k]);
    const double mem[] = { r->mem.weights, r->mem.grads, r->mem.optim, r->mem.act, r->mem.buffers, r->mem.total };
    for (guint k = 0; k < G_N_ELEMENTS(mem); k++) sp_csv_printf(&c, "%.0f", mem[k]);
    sp_csv_str(&c, r->fits ? "true" : "false");
    /* the keys added to layouts since the columns above (also in the layout column) */
    sp_csv_printf(&c, "%d", l->vpp_group);
    sp_csv_printf(&c, "%d", sp_layout_ep(l));
    sp_csv_printf(&c, "%d", sp_layout_etp(l));
    sp_csv_printf(&c, "%d", l->a2a_overlap ? 1 : 0);
    sp_csv_str(&c, l->ep_flex ? "flex" : "alltoall");
    g_autofree char *rm = l->ckpt == SP_CKPT_SELECTIVE ? sp_rmods_format(sp_layout_rmods(l)) : NULL;
    sp_csv_str(&c, rm ? rm : "");
    sp_csv_end_row(&c);
  }
  if (len) *len = c.s->len;
  return g_string_free(c.s, FALSE);
}
