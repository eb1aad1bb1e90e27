/* The what-if's chart (spsim/whatif.h): the step time of the top layouts as stacked
 * bars of compute, bubble and exposed communication per kind. */
#include "config.h"

#include <string.h>

#include "spsim/whatif.h"
#include "svg_out.h"

#define NSEG (2 + SP_COMM_KIND_COUNT)

static const char *const seg_color[NSEG] = { "#4e79a7", "#bab0ac", "#e15759", "#f28e2b", "#76b7b2", "#59a14f", "#edc948", "#b07aa1" };
static const char *const seg_name[NSEG] = { "compute", "bubble", "TP", "SP a2a", "ISP", "ring", "PP", "DP" };

/* Text widths are estimated, not measured: at most CHAR_W pixels per character of
 * 12-pixel sans-serif (DejaVu Sans, the common fallback, averages about 0.6 em) and
 * TITLE_CHAR_W at the title's 15-pixel bold, so that no label runs past the picture. */
#define CHAR_W 7.5
#define TITLE_CHAR_W 10.0

/* The label of row @p i of the chart and its value text. */
static void row_texts(const sp_whatif_result *res, guint i, char *label, gsize llen, char *value, gsize vlen)
{
  const sp_whatif_row *row = &g_array_index(res->rows, sp_whatif_row, g_array_index(res->shown, guint, i));
  g_snprintf(label, llen, "%u. %s%s", i + 1, row->label, row->r.fits ? "" : " (no fit)");
  g_snprintf(value, vlen, "%.3f s, MFU %.1f%%", row->r.step_time, 100 * row->r.mfu);
}

char *sp_whatif_to_svg(const sp_whatif_result *res, guint n)
{
  const double width = 620, bar = 22, gap = 10, top = 60;
  n = MIN(n, sp_whatif_shown(res));
  double maxt = 0, left = 230, right = 120;
  char label[256], value[64];
  for (guint i = 0; i < n; i++) {
    maxt = MAX(maxt, g_array_index(res->rows, sp_whatif_row, g_array_index(res->shown, guint, i)).r.step_time);
    row_texts(res, i, label, sizeof label, value, sizeof value);
    left = MAX(left, 10 + CHAR_W * (double)g_utf8_strlen(label, -1) + 8);
    right = MAX(right, 6 + CHAR_W * (double)strlen(value) + 10);
  }
  if (maxt <= 0) maxt = 1;
  g_autofree char *title = g_strdup_printf("spsim what-if: %s on %d GPUs, step time breakdown of the top %u layouts",
                                           res->model->name, res->ctx.world, n);
  double total = MAX(left + width + right, 10 + TITLE_CHAR_W * (double)g_utf8_strlen(title, -1) + 10);
  total = MAX(total, 10 + NSEG * 100.0);
  double height = top + n * (bar + gap) + 70;
  char attrs[160];
  GString *s = g_string_new("");
  sp_svg_begin(s, total, height, "font-family=\"sans-serif\" font-size=\"12\"");
  sp_svg_text(s, "x=\"10\" y=\"22\" font-size=\"15\" font-weight=\"bold\"", "%s", title);
  for (int k = 0; k < NSEG; k++) {
    double x = 10 + k * 100;
    g_string_append_printf(s, "<rect x=\"%.0f\" y=\"34\" width=\"12\" height=\"12\" fill=\"%s\"/>", x, seg_color[k]);
    g_snprintf(attrs, sizeof attrs, "x=\"%.0f\" y=\"45\"", x + 16);
    sp_svg_text(s, attrs, "%s", seg_name[k]);
  }
  for (guint i = 0; i < n; i++) {
    const sp_whatif_row *row = &g_array_index(res->rows, sp_whatif_row, g_array_index(res->shown, guint, i));
    const sp_step_result *r = &row->r;
    double y = top + i * (bar + gap);
    row_texts(res, i, label, sizeof label, value, sizeof value);
    g_snprintf(attrs, sizeof attrs, "x=\"%.0f\" y=\"%.1f\" text-anchor=\"end\"", left - 8, y + bar * 0.7);
    sp_svg_text(s, attrs, "%s", label);
    double segs[NSEG] = { r->compute, r->bubble };
    for (int k = 0; k < SP_COMM_KIND_COUNT; k++) segs[2 + k] = r->exposed[k];
    double x = left;
    for (int k = 0; k < NSEG; k++) {
      double w = segs[k] / maxt * width;
      if (w <= 0) continue;
      char val[G_ASCII_DTOSTR_BUF_SIZE];
      g_ascii_formatd(val, sizeof val, "%.3f", segs[k]);
      g_string_append_printf(s, "<rect x=\"%.2f\" y=\"%.1f\" width=\"%.2f\" height=\"%.0f\" fill=\"%s\"><title>", x, y, w, bar,
                             seg_color[k]);
      sp_svg_chars(s, seg_name[k]);
      g_string_append_printf(s, ": %s s</title></rect>\n", val);
      x += w;
    }
    g_snprintf(attrs, sizeof attrs, "x=\"%.2f\" y=\"%.1f\"", x + 6, y + bar * 0.7);
    sp_svg_text(s, attrs, "%s", value);
  }
  double ay = top + n * (bar + gap) + 5;
  g_string_append_printf(s, "<line x1=\"%.0f\" y1=\"%.1f\" x2=\"%.0f\" y2=\"%.1f\" stroke=\"black\"/>\n", left, ay, left + width, ay);
  for (int t = 0; t <= 4; t++) {
    double x = left + width * t / 4.0;
    g_string_append_printf(s, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"black\"/>", x, ay, x, ay + 5);
    g_snprintf(attrs, sizeof attrs, "x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\"", x, ay + 18);
    sp_svg_text(s, attrs, "%.2f s", maxt * t / 4.0);
  }
  g_snprintf(attrs, sizeof attrs, "x=\"%.0f\" y=\"%.1f\" text-anchor=\"middle\"", left + width / 2, ay + 36);
  sp_svg_text(s, attrs, "seconds per training step (exposed communication only; overlapped transfers are hidden)");
  sp_svg_end(s);
  return g_string_free(s, FALSE);
}
