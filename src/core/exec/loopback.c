/* In-process loopback: runs the programs of ranks 0..world-1 in one thread.
 *
 * Sends are buffered: the payload is packed into a per-(src, dst, tag) FIFO and
 * the send completes at once. A receive completes when the head of its FIFO
 * exists; sizes must agree. Ranks are resumed round-robin (0, 1, ..., world-1)
 * until all are done; a full pass without progress is a deadlock. Everything
 * is deterministic. In cost mode (no buffers) only sizes travel.
 */
#include "config.h"

#include <string.h>

#include "spsim/error.h"
#include "spsim/exec.h"

typedef struct {
  int32_t src, dst, tag;
} lb_key;

typedef struct {
  uint64_t bytes;
  guchar *payload; /* NULL in cost mode */
} lb_msg;

typedef struct {
  int32_t peer, tag;
  void *data;
  uint64_t rows, row_bytes, stride;
  gboolean done;
} lb_recv;

typedef struct lb_world lb_world;

typedef struct {
  lb_world *w;
  int32_t rank;
  GArray *recvs; /* of lb_recv, posted since the last completed wait */
} lb_rank;

struct lb_world {
  int32_t world;
  GHashTable *queues; /* lb_key* -> GQueue* of lb_msg* */
  GPtrArray *keys;    /* lb_key* in creation order, for deterministic reports */
  guint64 events;     /* counts posts and completions: progress detection */
};

static guint key_hash(gconstpointer p)
{
  const lb_key *k = p;
  guint h = 2166136261u;
  h = (h ^ (guint)k->src) * 16777619u;
  h = (h ^ (guint)k->dst) * 16777619u;
  h = (h ^ (guint)k->tag) * 16777619u;
  return h;
}

static gboolean key_equal(gconstpointer a, gconstpointer b)
{
  const lb_key *x = a, *y = b;
  return x->src == y->src && x->dst == y->dst && x->tag == y->tag;
}

static void msg_free(gpointer p)
{
  lb_msg *m = p;
  g_free(m->payload);
  g_free(m);
}

static void queue_free(gpointer p)
{
  g_queue_free_full(p, msg_free);
}

static GQueue *world_queue(lb_world *w, int32_t src, int32_t dst, int32_t tag, gboolean create)
{
  lb_key k = { src, dst, tag };
  GQueue *q = g_hash_table_lookup(w->queues, &k);
  if (q == NULL && create) {
    lb_key *nk = g_memdup2(&k, sizeof k);
    q = g_queue_new();
    g_hash_table_insert(w->queues, nk, q);
    g_ptr_array_add(w->keys, nk);
  }
  return q;
}

static gboolean peer_ok(lb_rank *r, int32_t peer, const char *what, GError **err)
{
  if (peer < 0 || peer >= r->w->world || peer == r->rank) {
    g_set_error(err, SP_ERROR, SP_ERROR_TRANSPORT,
                "loopback: rank %d posted a %s with peer %d; peers must be other ranks in [0, %d)",
                r->rank, what, peer, r->w->world);
    return FALSE;
  }
  return TRUE;
}

static gboolean lb_post_send(void *ctx, int32_t peer, int32_t tag, const void *data, uint64_t rows,
                             uint64_t row_bytes, uint64_t stride, GError **err)
{
  lb_rank *r = ctx;
  if (!peer_ok(r, peer, "send", err))
    return FALSE;
  lb_msg *m = g_new0(lb_msg, 1);
  m->bytes = rows * row_bytes;
  if (data != NULL && m->bytes > 0) {
    m->payload = g_malloc(m->bytes);
    sp_pack_host(m->payload, data, rows, row_bytes, stride);
  }
  g_queue_push_tail(world_queue(r->w, r->rank, peer, tag, TRUE), m);
  r->w->events++;
  return TRUE;
}

static gboolean lb_post_recv(void *ctx, int32_t peer, int32_t tag, void *data, uint64_t rows,
                             uint64_t row_bytes, uint64_t stride, GError **err)
{
  lb_rank *r = ctx;
  if (!peer_ok(r, peer, "recv", err))
    return FALSE;
  lb_recv rv = { .peer = peer, .tag = tag, .data = data, .rows = rows, .row_bytes = row_bytes,
                 .stride = stride, .done = FALSE };
  g_array_append_val(r->recvs, rv);
  r->w->events++;
  return TRUE;
}

static sp_wait_status lb_wait_all(void *ctx, GError **err)
{
  lb_rank *r = ctx;
  gboolean all = TRUE;
  /* in posting order, so recvs on one (src, tag) match messages in order */
  for (guint i = 0; i < r->recvs->len; i++) {
    lb_recv *rv = &g_array_index(r->recvs, lb_recv, i);
    if (rv->done)
      continue;
    GQueue *q = world_queue(r->w, rv->peer, r->rank, rv->tag, FALSE);
    lb_msg *m = q ? g_queue_peek_head(q) : NULL;
    if (m == NULL) {
      all = FALSE;
      continue;
    }
    uint64_t want = rv->rows * rv->row_bytes;
    if (m->bytes != want) {
      g_set_error(err, SP_ERROR, SP_ERROR_TRANSPORT,
                  "loopback: size mismatch: rank %d posted a recv of %" G_GUINT64_FORMAT
                  " bytes from rank %d (tag %d), but rank %d sent %" G_GUINT64_FORMAT
                  " bytes; make the send and recv sizes agree",
                  r->rank, want, rv->peer, rv->tag, rv->peer, m->bytes);
      return SP_WAIT_ERROR;
    }
    g_queue_pop_head(q);
    if (rv->data != NULL && m->payload != NULL)
      sp_unpack_host(rv->data, m->payload, rv->rows, rv->row_bytes, rv->stride);
    msg_free(m);
    rv->done = TRUE;
    r->w->events++;
  }
  if (!all)
    return SP_WAIT_PENDING;
  g_array_set_size(r->recvs, 0);
  return SP_WAIT_DONE;
}

static const sp_transport_ops lb_ops = {
  .name = "loopback",
  .post_send = lb_post_send,
  .post_recv = lb_post_recv,
  .wait_all = lb_wait_all,
  .local = NULL,
  .clock = NULL,
};

/* "rank 3 waits on recv from rank 4 (tag 0, 64 bytes)" for the first pending recv. */
static void describe_blocked(GString *s, const lb_rank *r)
{
  guint pending = 0;
  const lb_recv *first = NULL;
  for (guint i = 0; i < r->recvs->len; i++) {
    const lb_recv *rv = &g_array_index(r->recvs, lb_recv, i);
    if (!rv->done) {
      if (first == NULL)
        first = rv;
      pending++;
    }
  }
  if (first == NULL) {
    g_string_append_printf(s, "rank %d cannot progress", r->rank);
    return;
  }
  g_string_append_printf(s, "rank %d waits on recv from rank %d (tag %d, %" G_GUINT64_FORMAT
                         " bytes)", r->rank, first->peer, first->tag,
                         first->rows * first->row_bytes);
  if (pending > 1)
    g_string_append_printf(s, " and %u more recv(s)", pending - 1);
}

gboolean sp_loopback_run(sp_program *const *progs, int32_t world, void **const *bufs, GError **err)
{
  if (progs == NULL || world <= 0) {
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID,
                "loopback: need at least one program (world = %d)", world);
    return FALSE;
  }
  for (int32_t r = 0; r < world; r++) {
    if (progs[r] == NULL || progs[r]->rank != r) {
      g_set_error(err, SP_ERROR, SP_ERROR_INVALID,
                  "loopback: program %d is %s; progs[r] must be rank r's program", r,
                  progs[r] == NULL ? "missing" : "for another rank");
      return FALSE;
    }
    if (!sp_program_validate(progs[r], world, err))
      return FALSE;
  }

  lb_world w = { .world = world, .events = 0 };
  w.queues = g_hash_table_new_full(key_hash, key_equal, NULL, queue_free);
  w.keys = g_ptr_array_new_with_free_func(g_free);
  lb_rank *ranks = g_new0(lb_rank, world);
  sp_transport *tr = g_new0(sp_transport, world);
  sp_exec **ex = g_new0(sp_exec *, world);
  gboolean *done = g_new0(gboolean, world);
  gboolean ok = TRUE;

  for (int32_t r = 0; r < world; r++) {
    ranks[r].w = &w;
    ranks[r].rank = r;
    ranks[r].recvs = g_array_new(FALSE, TRUE, sizeof(lb_recv));
    tr[r].ops = &lb_ops;
    tr[r].ctx = &ranks[r];
    ex[r] = sp_exec_new(progs[r], &tr[r], bufs ? (void *const *)bufs[r] : NULL, NULL);
  }

  int32_t remaining = world;
  while (ok && remaining > 0) {
    gboolean progressed = FALSE;
    for (int32_t r = 0; r < world && ok; r++) {
      if (done[r])
        continue;
      guint64 before = w.events;
      sp_wait_status st = sp_exec_resume(ex[r], err);
      if (st == SP_WAIT_ERROR) {
        ok = FALSE;
      } else if (st == SP_WAIT_DONE) {
        done[r] = TRUE;
        remaining--;
        progressed = TRUE;
      } else if (w.events != before) {
        progressed = TRUE;
      }
    }
    if (ok && remaining > 0 && !progressed) {
      GString *s = g_string_new("loopback: deadlock: ranks ");
      int32_t listed = 0;
      for (int32_t r = 0; r < world; r++)
        if (!done[r] && listed++ < 8)
          g_string_append_printf(s, "%s%d", listed > 1 ? ", " : "", r);
      if (remaining > 8)
        g_string_append_printf(s, " (and %d more)", remaining - 8);
      g_string_append(s, " are blocked: ");
      listed = 0;
      for (int32_t r = 0; r < world && listed < 8; r++)
        if (!done[r]) {
          if (listed++ > 0)
            g_string_append(s, "; ");
          describe_blocked(s, &ranks[r]);
        }
      g_string_append(s, ". Every recv needs a matching send (same peers and tag) that "
                         "does not itself wait on it");
      g_set_error_literal(err, SP_ERROR, SP_ERROR_TRANSPORT, s->str);
      g_string_free(s, TRUE);
      ok = FALSE;
    }
  }

  /* messages nobody received are a schedule bug too */
  if (ok) {
    for (guint i = 0; i < w.keys->len; i++) {
      const lb_key *k = g_ptr_array_index(w.keys, i);
      GQueue *q = g_hash_table_lookup(w.queues, k);
      if (q && !g_queue_is_empty(q)) {
        const lb_msg *m = g_queue_peek_head(q);
        g_set_error(err, SP_ERROR, SP_ERROR_TRANSPORT,
                    "loopback: rank %d sent %u message(s) to rank %d (tag %d, first of %"
                    G_GUINT64_FORMAT " bytes) that were never received; add the matching recv",
                    k->src, g_queue_get_length(q), k->dst, k->tag, m->bytes);
        ok = FALSE;
        break;
      }
    }
  }

  for (int32_t r = 0; r < world; r++) {
    sp_exec_free(ex[r]);
    g_array_unref(ranks[r].recvs);
  }
  g_free(ex);
  g_free(tr);
  g_free(ranks);
  g_free(done);
  g_hash_table_destroy(w.queues);
  g_ptr_array_unref(w.keys);
  return ok;
}
