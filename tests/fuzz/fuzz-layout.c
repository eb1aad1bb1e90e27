/* Fuzz harness: parallel layouts (sp_layout_parse), checked against a fixed job
 * (a built-in-sized model, 64 GPUs, 8 per node, seq 4096, global batch 64);
 * sp_layout_to_string of a resolved layout must parse back to the same layout. */
#include "config.h"

#include <string.h>

#include "fuzz.h"
#include "spsim/error.h"
#include "spsim/layout.h"
#include "spsim/model.h"

/* llama3-8b's shape (models/llama3-8b.json) */
static const char model_json[] =
  "{\"name\":\"fuzz-8b\",\"layers\":32,\"hidden\":4096,\"heads\":32,\"kv_heads\":8,"
  "\"ffn\":14336,\"vocab\":128256,\"dtype\":\"bf16\",\"mlp\":\"swiglu\"}";

static gboolean same_layout(const sp_layout *a, const sp_layout *b)
{
  return a->tp == b->tp && !a->tp_sp == !b->tp_sp && a->sp == b->sp && a->cp == b->cp &&
         a->wp == b->wp && a->pp == b->pp && sp_layout_vpp(a) == sp_layout_vpp(b) &&
         a->dp == b->dp && a->zero == b->zero && a->ckpt == b->ckpt && a->rmods == b->rmods && a->mb == b->mb;
}

/* A layout whose every field is set must print to text that parses back to it. */
static void round_trip(const sp_layout *l)
{
  if (l->dp < 1 || l->mb < 1)
    return; /* unresolved (derive dp, micro-batch from the job): not printable as input */
  char *s = sp_layout_to_string(l);
  char *label = sp_layout_label(l);
  FUZZ_ASSERT(label != NULL && *label != '\0', "empty label");
  sp_layout back;
  GError *err = NULL;
  FUZZ_ASSERT(sp_layout_parse(s, &back, &err), "'%s' does not parse back: %s", s, err->message);
  FUZZ_ASSERT(same_layout(l, &back), "'%s' parses back to another layout", s);
  char *again = sp_layout_to_string(&back);
  FUZZ_ASSERT(strcmp(s, again) == 0, "'%s' prints back as '%s'", s, again);
  g_free(again);
  g_free(label);
  g_free(s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  fuzz_setup();
  static sp_model *model = NULL;
  if (model == NULL) {
    model = sp_model_parse(model_json, -1, "fuzz", NULL);
    FUZZ_ASSERT(model != NULL, "built-in model");
  }
  if (size > 4096)
    return 0;
  char *text = g_strndup((const char *)data, size);
  sp_layout l;
  GError *err = NULL;
  if (!sp_layout_parse(text, &l, &err)) {
    FUZZ_EXPECT_ERROR(err);
    g_error_free(err);
    g_free(text);
    return 0;
  }
  round_trip(&l);
  g_free(sp_layout_label(&l));
  const sp_layout_ctx ctx = { .model = model, .world = 64, .gpus_per_node = 8, .seq = 4096,
                              .global_batch = 64, .mb = 1 };
  sp_skip r = sp_layout_check(&l, &ctx, &err);
  FUZZ_ASSERT((unsigned)r < SP_SKIP_COUNT, "skip reason %d", (int)r);
  if (r != SP_SKIP_NONE) {
    FUZZ_EXPECT_ERROR(err);
    g_error_free(err);
  } else {
    FUZZ_ASSERT(err == NULL, "error set on a valid layout");
    FUZZ_ASSERT((int64_t)l.tp * l.sp * l.cp * l.pp * l.dp == ctx.world, "degrees do not multiply to 64");
    FUZZ_ASSERT(sp_layout_microbatches(&l, &ctx) >= 1, "no micro-batch");
    FUZZ_ASSERT(sp_layout_stage_layers(&l, model) >= 1, "empty stage");
    FUZZ_ASSERT(sp_layout_replicas(&l) >= 1, "no replica");
    /* the same verdict without a message */
    sp_layout again = l;
    FUZZ_ASSERT(sp_layout_check(&again, &ctx, NULL) == SP_SKIP_NONE, "check is not stable");
  }
  FUZZ_ASSERT(sp_skip_reason(r) != NULL, "no reason text");
  round_trip(&l);
  g_free(text);
  return 0;
}
