/* Executor, loopback and traces: hand-written schedules with hand-derived
 * results, deadlocks and mismatches reported (never hangs), cost mode, and the
 * Chrome trace parsed back with json-glib. */
#include "config.h"
#include <glib.h>
#include <glib/gstdio.h>
#include <json-glib/json-glib.h>
#include <string.h>
#include "spsim/error.h"
#include "spsim/exec.h"

static void add(sp_program *p, sp_step s)
{
  sp_program_append(p, &s);
}

static void free_progs(sp_program **progs, int n)
{
  for (int i = 0; i < n; i++)
    sp_program_free(progs[i]);
}

/* ------------------------------------------------------------ loopback */

/* 3-rank ring: every rank views its 24-byte buffer as 4 rows of 6 bytes, sends
 * bytes 0..1 of each row to the next rank and receives the previous rank's into
 * bytes 4..5 of each row; then adds (u8) row 0's received bytes into its own. */
static void build_ring(sp_program **progs, gboolean recv_first_on_1)
{
  for (int r = 0; r < 3; r++) {
    sp_program *p = progs[r] = sp_program_new(r);
    sp_program_add_buffer(p, 24, "x");
    sp_step snd = { .kind = SP_STEP_SEND, .op = 1, .phase = 0, .peer = (r + 1) % 3, .tag = 5,
                    .src = { 0, 0 }, .bytes = 8, .rows = 4, .row_bytes = 2, .src_stride = 6 };
    sp_step rcv = { .kind = SP_STEP_RECV, .op = 1, .phase = 0, .peer = (r + 2) % 3, .tag = 5,
                    .dst = { 0, 4 }, .bytes = 8, .rows = 4, .row_bytes = 2, .dst_stride = 6 };
    if (recv_first_on_1 && r == 1) {
      add(p, rcv);
      add(p, snd);
    } else {
      add(p, snd);
      add(p, rcv);
    }
    add(p, (sp_step){ .kind = SP_STEP_WAIT });
    add(p, (sp_step){ .kind = SP_STEP_REDUCE, .op = 2, .dst = { 0, 0 }, .src = { 0, 4 },
                      .count = 2, .dtype = SP_U8, .redop = SP_RED_SUM });
  }
}

static void test_ring(void)
{
  for (int variant = 0; variant < 2; variant++) {
    sp_program *progs[3];
    build_ring(progs, variant == 1);
    guchar mem[3][24];
    void *b[3][1];
    void **bufs[3];
    for (int r = 0; r < 3; r++) {
      for (int i = 0; i < 24; i++)
        mem[r][i] = (guchar)(r * 32 + i);
      b[r][0] = mem[r];
      bufs[r] = b[r];
    }
    GError *err = NULL;
    g_assert_true(sp_loopback_run(progs, 3, bufs, &err));
    g_assert_no_error(err);
    for (int r = 0; r < 3; r++) {
      int p = (r + 2) % 3;
      for (int k = 0; k < 4; k++)
        for (int c = 0; c < 6; c++) {
          int i = 6 * k + c;
          int expect = r * 32 + i; /* untouched */
          if (c == 4 || c == 5)
            expect = p * 32 + 6 * k + (c - 4); /* received from the previous rank */
          if (k == 0 && c < 2)
            expect = (r * 32 + c) + (p * 32 + c); /* the reduce */
          g_assert_cmpint(mem[r][i], ==, expect);
        }
    }
    /* cost mode: same schedule, no buffers */
    g_assert_true(sp_loopback_run(progs, 3, NULL, &err));
    g_assert_no_error(err);
    free_progs(progs, 3);
  }
}

/* Ring all-gather on 5 ranks: after 4 steps every rank holds every rank's chunk. */
static void test_ring_allgather(void)
{
  enum { P = 5, CH = 7 }; /* 7 floats per chunk */
  sp_program *progs[P];
  float mem[P][P * CH];
  void *b[P][1];
  void **bufs[P];
  for (int r = 0; r < P; r++) {
    sp_program *p = progs[r] = sp_program_new(r);
    sp_program_add_buffer(p, sizeof mem[r], "out");
    for (int k = 0; k < P - 1; k++) {
      int sc = ((r - k) % P + P) % P, rc = ((r - k - 1) % P + P) % P;
      add(p, (sp_step){ .kind = SP_STEP_SEND, .op = 9, .phase = (uint32_t)k, .peer = (r + 1) % P,
                        .src = { 0, (uint64_t)sc * CH * 4 }, .bytes = CH * 4 });
      add(p, (sp_step){ .kind = SP_STEP_RECV, .op = 9, .phase = (uint32_t)k,
                        .peer = (r + P - 1) % P, .dst = { 0, (uint64_t)rc * CH * 4 },
                        .bytes = CH * 4 });
      add(p, (sp_step){ .kind = SP_STEP_WAIT });
    }
    memset(mem[r], 0, sizeof mem[r]);
    sp_fill_pattern(mem[r] + r * CH, CH, SP_F32, 1000 + (uint64_t)r, 0);
    b[r][0] = mem[r];
    bufs[r] = b[r];
  }
  GError *err = NULL;
  g_assert_true(sp_loopback_run(progs, P, bufs, &err));
  g_assert_no_error(err);
  float expect[P * CH];
  for (int j = 0; j < P; j++)
    sp_fill_pattern(expect + j * CH, CH, SP_F32, 1000 + (uint64_t)j, 0);
  for (int r = 0; r < P; r++)
    g_assert_cmpmem(mem[r], sizeof expect, expect, sizeof expect);
  free_progs(progs, P);
}

static void test_deadlock(void)
{
  for (int cost = 0; cost < 2; cost++) {
    sp_program *progs[3];
    guchar mem[3][16];
    void *b[3][1];
    void **bufs[3];
    for (int r = 0; r < 2; r++) {
      sp_program *p = progs[r] = sp_program_new(r);
      sp_program_add_buffer(p, 16, "x");
      add(p, (sp_step){ .kind = SP_STEP_RECV, .peer = 1 - r, .tag = 3, .dst = { 0, 0 }, .bytes = 16 });
      add(p, (sp_step){ .kind = SP_STEP_WAIT });
      add(p, (sp_step){ .kind = SP_STEP_SEND, .peer = 1 - r, .tag = 3, .src = { 0, 0 }, .bytes = 16 });
      add(p, (sp_step){ .kind = SP_STEP_WAIT });
      b[r][0] = mem[r];
      bufs[r] = b[r];
    }
    /* rank 2 finishes at once */
    progs[2] = sp_program_new(2);
    b[2][0] = mem[2];
    bufs[2] = b[2];
    GError *err = NULL;
    g_assert_false(sp_loopback_run(progs, 3, cost ? NULL : bufs, &err));
    g_assert_error(err, SP_ERROR, SP_ERROR_TRANSPORT);
    g_test_message("%s", err->message);
    g_assert_nonnull(strstr(err->message, "deadlock"));
    g_assert_nonnull(strstr(err->message, "ranks 0, 1 are blocked"));
    g_assert_nonnull(strstr(err->message, "rank 0 waits on recv from rank 1 (tag 3, 16 bytes)"));
    g_assert_nonnull(strstr(err->message, "rank 1 waits on recv from rank 0"));
    g_clear_error(&err);
    free_progs(progs, 3);
  }
}

static void test_mismatch(void)
{
  sp_program *progs[2];
  progs[0] = sp_program_new(0);
  sp_program_add_buffer(progs[0], 8, "x");
  add(progs[0], (sp_step){ .kind = SP_STEP_SEND, .peer = 1, .tag = 7, .src = { 0, 0 }, .bytes = 8 });
  add(progs[0], (sp_step){ .kind = SP_STEP_WAIT });
  progs[1] = sp_program_new(1);
  sp_program_add_buffer(progs[1], 8, "x");
  add(progs[1], (sp_step){ .kind = SP_STEP_RECV, .peer = 0, .tag = 7, .dst = { 0, 0 }, .bytes = 4 });
  add(progs[1], (sp_step){ .kind = SP_STEP_WAIT });
  GError *err = NULL;
  g_assert_false(sp_loopback_run(progs, 2, NULL, &err));
  g_assert_error(err, SP_ERROR, SP_ERROR_TRANSPORT);
  g_assert_nonnull(strstr(err->message, "size mismatch"));
  g_assert_nonnull(strstr(err->message, "rank 1 posted a recv of 4 bytes from rank 0 (tag 7)"));
  g_assert_nonnull(strstr(err->message, "sent 8 bytes"));
  g_clear_error(&err);

  /* a message nobody receives */
  sp_program_free(progs[1]);
  progs[1] = sp_program_new(1);
  g_assert_false(sp_loopback_run(progs, 2, NULL, &err));
  g_assert_error(err, SP_ERROR, SP_ERROR_TRANSPORT);
  g_assert_nonnull(strstr(err->message, "never received"));
  g_clear_error(&err);

  /* a program for the wrong rank, and an invalid program */
  sp_program *swapped[2] = { progs[1], progs[0] };
  g_assert_false(sp_loopback_run(swapped, 2, NULL, &err));
  g_assert_error(err, SP_ERROR, SP_ERROR_INVALID);
  g_clear_error(&err);
  g_assert_false(sp_loopback_run(progs, 1, NULL, &err)); /* peer 1 outside a world of 1 */
  g_assert_error(err, SP_ERROR, SP_ERROR_INVALID);
  g_clear_error(&err);
  free_progs(progs, 2);
}

/* 12 ranks all receiving first: the report lists 8 ranks and counts the rest. */
static void test_deadlock_many(void)
{
  enum { N = 12 };
  sp_program *progs[N];
  for (int r = 0; r < N; r++) {
    sp_program *p = progs[r] = sp_program_new(r);
    sp_program_add_buffer(p, 4, "x");
    add(p, (sp_step){ .kind = SP_STEP_RECV, .peer = (r + 1) % N, .dst = { 0, 0 }, .bytes = 4 });
    add(p, (sp_step){ .kind = SP_STEP_WAIT });
    add(p, (sp_step){ .kind = SP_STEP_SEND, .peer = (r + N - 1) % N, .src = { 0, 0 }, .bytes = 4 });
    add(p, (sp_step){ .kind = SP_STEP_WAIT });
  }
  GError *err = NULL;
  g_assert_false(sp_loopback_run(progs, N, NULL, &err));
  g_assert_error(err, SP_ERROR, SP_ERROR_TRANSPORT);
  g_assert_nonnull(strstr(err->message, "deadlock: ranks 0, 1, 2, 3, 4, 5, 6, 7 (and 4 more) are blocked"));
  g_assert_nonnull(strstr(err->message, "rank 7 waits on recv from rank 8"));
  g_assert_null(strstr(err->message, "rank 8 waits"));
  g_clear_error(&err);
  free_progs(progs, N);
}

/* A relay against the round-robin order: rank N-1 starts it, each rank r forwards
 * to r-1 after receiving, so every pass completes exactly one more hop. */
static void test_reverse_relay(void)
{
  enum { N = 40 };
  sp_program *progs[N];
  int64_t mem[N];
  void *b[N][1];
  void **bufs[N];
  for (int r = 0; r < N; r++) {
    sp_program *p = progs[r] = sp_program_new(r);
    sp_program_add_buffer(p, 8, "v");
    if (r < N - 1) {
      add(p, (sp_step){ .kind = SP_STEP_RECV, .peer = r + 1, .dst = { 0, 0 }, .bytes = 8 });
      add(p, (sp_step){ .kind = SP_STEP_WAIT });
    }
    if (r > 0) {
      add(p, (sp_step){ .kind = SP_STEP_SEND, .peer = r - 1, .src = { 0, 0 }, .bytes = 8 });
      add(p, (sp_step){ .kind = SP_STEP_WAIT });
    }
    mem[r] = r == N - 1 ? 123456789012345 : -1;
    b[r][0] = &mem[r];
    bufs[r] = b[r];
  }
  GError *err = NULL;
  g_assert_true(sp_loopback_run(progs, N, bufs, &err));
  g_assert_no_error(err);
  for (int r = 0; r < N; r++)
    g_assert_cmpint(mem[r], ==, 123456789012345);
  free_progs(progs, N);
}

/* Messages of one (src, dst, tag) match in posting order; tags keep streams apart. */
static void test_ordering(void)
{
  sp_program *progs[2];
  int32_t m0[4] = { 11, 22, 33, 44 }, m1[4] = { 0, 0, 0, 0 };
  void *b0[1] = { m0 }, *b1[1] = { m1 };
  void **bufs[2] = { b0, b1 };
  progs[0] = sp_program_new(0);
  sp_program_add_buffer(progs[0], 16, "x");
  add(progs[0], (sp_step){ .kind = SP_STEP_SEND, .peer = 1, .tag = 0, .src = { 0, 0 }, .bytes = 4 });
  add(progs[0], (sp_step){ .kind = SP_STEP_SEND, .peer = 1, .tag = 1, .src = { 0, 4 }, .bytes = 4 });
  add(progs[0], (sp_step){ .kind = SP_STEP_SEND, .peer = 1, .tag = 0, .src = { 0, 8 }, .bytes = 4 });
  add(progs[0], (sp_step){ .kind = SP_STEP_WAIT });
  add(progs[0], (sp_step){ .kind = SP_STEP_SEND, .peer = 1, .tag = 0, .src = { 0, 12 }, .bytes = 4 });
  add(progs[0], (sp_step){ .kind = SP_STEP_WAIT });
  progs[1] = sp_program_new(1);
  sp_program_add_buffer(progs[1], 16, "y");
  /* tag 0 first message -> y[3], tag 1 -> y[0], tag 0 second -> y[2], third -> y[1] */
  add(progs[1], (sp_step){ .kind = SP_STEP_RECV, .peer = 0, .tag = 0, .dst = { 0, 12 }, .bytes = 4 });
  add(progs[1], (sp_step){ .kind = SP_STEP_RECV, .peer = 0, .tag = 0, .dst = { 0, 8 }, .bytes = 4 });
  add(progs[1], (sp_step){ .kind = SP_STEP_RECV, .peer = 0, .tag = 0, .dst = { 0, 4 }, .bytes = 4 });
  add(progs[1], (sp_step){ .kind = SP_STEP_RECV, .peer = 0, .tag = 1, .dst = { 0, 0 }, .bytes = 4 });
  add(progs[1], (sp_step){ .kind = SP_STEP_WAIT });
  GError *err = NULL;
  g_assert_true(sp_loopback_run(progs, 2, bufs, &err));
  g_assert_no_error(err);
  g_assert_cmpint(m1[0], ==, 22);
  g_assert_cmpint(m1[1], ==, 44);
  g_assert_cmpint(m1[2], ==, 33);
  g_assert_cmpint(m1[3], ==, 11);
  free_progs(progs, 2);
}

/* ------------------------------------------------------------ executor */

/* A scripted transport: clock advances 1 s per completed wait and 0.5 s per
 * local step; wait_all answers PENDING @c pending_left times first. */
typedef struct {
  double now;
  int sends, recvs, waits, locals;
  int pending_left;
  gboolean fail_send;
  uint64_t last_rows, last_row_bytes, last_stride;
  const void *last_data;
} fake;

static gboolean fake_send(void *ctx, int32_t peer, int32_t tag, const void *data, uint64_t rows,
                          uint64_t row_bytes, uint64_t stride, GError **err)
{
  fake *f = ctx;
  if (f->fail_send) {
    g_set_error(err, SP_ERROR, SP_ERROR_TRANSPORT, "fake: peer %d is gone", peer);
    return FALSE;
  }
  f->sends++;
  f->last_rows = rows;
  f->last_row_bytes = row_bytes;
  f->last_stride = stride;
  f->last_data = data;
  return TRUE;
}

static gboolean fake_recv(void *ctx, int32_t peer, int32_t tag, void *data, uint64_t rows,
                          uint64_t row_bytes, uint64_t stride, GError **err)
{
  fake *f = ctx;
  f->recvs++;
  return TRUE;
}

static sp_wait_status fake_wait(void *ctx, GError **err)
{
  fake *f = ctx;
  f->waits++;
  if (f->pending_left > 0) {
    f->pending_left--;
    return SP_WAIT_PENDING;
  }
  f->now += 1.0;
  return SP_WAIT_DONE;
}

static gboolean fake_local(void *ctx, const sp_step *s, void *const *bufs, GError **err)
{
  fake *f = ctx;
  f->locals++;
  f->now += 0.5;
  return TRUE;
}

static double fake_clock(void *ctx)
{
  return ((fake *)ctx)->now;
}

static const sp_transport_ops fake_ops = { "fake", fake_send, fake_recv, fake_wait, fake_local,
                                           fake_clock };
static const sp_transport_ops fake_ops_nolocal = { "fake-nolocal", fake_send, fake_recv,
                                                   fake_wait, NULL, NULL };

static sp_program *two_blocks(void)
{
  sp_program *p = sp_program_new(0);
  sp_program_add_buffer(p, 400, "a");
  add(p, (sp_step){ .kind = SP_STEP_SEND, .op = 5, .phase = 1, .peer = 1, .src = { 0, 0 },
                    .bytes = 100 });
  add(p, (sp_step){ .kind = SP_STEP_RECV, .op = 5, .phase = 2, .peer = 2, .dst = { 0, 100 },
                    .bytes = 50 });
  add(p, (sp_step){ .kind = SP_STEP_SEND, .op = 5, .phase = 2, .peer = 2, .src = { 0, 200 },
                    .bytes = 60, .rows = 3, .row_bytes = 20, .src_stride = 40 });
  add(p, (sp_step){ .kind = SP_STEP_WAIT });
  add(p, (sp_step){ .kind = SP_STEP_COPY, .op = 6, .src = { 0, 0 }, .dst = { 0, 300 },
                    .bytes = 10 });
  add(p, (sp_step){ .kind = SP_STEP_WAIT }); /* nothing posted: no event, no wait_all */
  add(p, (sp_step){ .kind = SP_STEP_RECV, .op = 7, .phase = 0, .peer = 1, .dst = { 0, 0 },
                    .bytes = 8 });
  add(p, (sp_step){ .kind = SP_STEP_WAIT });
  add(p, (sp_step){ .kind = SP_STEP_REDUCE, .op = 8, .dst = { 0, 0 }, .src = { 0, 16 },
                    .count = 4, .dtype = SP_F32, .redop = SP_RED_SUM });
  return p;
}

static void test_exec_trace(void)
{
  sp_program *p = two_blocks();
  fake f = { 0 };
  sp_transport t = { &fake_ops, &f };
  sp_trace *tr = sp_trace_new();
  GError *err = NULL;
  g_assert_true(sp_exec_run(p, &t, NULL, tr, &err));
  g_assert_no_error(err);
  g_assert_cmpint(f.sends, ==, 2);
  g_assert_cmpint(f.recvs, ==, 2);
  g_assert_cmpint(f.waits, ==, 2);
  g_assert_cmpint(f.locals, ==, 2);
  /* the strided send reached the transport as (3 rows, 20 bytes, stride 40), cost mode */
  g_assert_cmpuint(f.last_rows, ==, 3);
  g_assert_cmpuint(f.last_row_bytes, ==, 20);
  g_assert_cmpuint(f.last_stride, ==, 40);
  g_assert_null(f.last_data);

  /* block (0..1), copy (1..1.5), block (1.5..2.5), reduce (2.5..3) */
  g_assert_cmpuint(sp_trace_len(tr), ==, 4);
  const sp_trace_event *e = sp_trace_get(tr, 0);
  g_assert_cmpint(e->kind, ==, SP_STEP_WAIT);
  g_assert_cmpuint(e->op, ==, 5);
  g_assert_cmpuint(e->phase, ==, 1);
  g_assert_cmpuint(e->bytes, ==, 160); /* 100 + 60 sent */
  g_assert_cmpfloat(e->start, ==, 0.0);
  g_assert_cmpfloat(e->end, ==, 1.0);
  e = sp_trace_get(tr, 1);
  g_assert_cmpint(e->kind, ==, SP_STEP_COPY);
  g_assert_cmpuint(e->bytes, ==, 10);
  g_assert_cmpfloat(e->start, ==, 1.0);
  g_assert_cmpfloat(e->end, ==, 1.5);
  e = sp_trace_get(tr, 2);
  g_assert_cmpuint(e->op, ==, 7);
  g_assert_cmpuint(e->bytes, ==, 0); /* nothing sent */
  g_assert_cmpfloat(e->start, ==, 1.5);
  g_assert_cmpfloat(e->end, ==, 2.5);
  e = sp_trace_get(tr, 3);
  g_assert_cmpint(e->kind, ==, SP_STEP_REDUCE);
  g_assert_cmpuint(e->bytes, ==, 16);
  g_assert_cmpfloat(e->end, ==, 3.0);
  sp_trace_free(tr);
  sp_program_free(p);
}

static void test_exec_pending(void)
{
  sp_program *p = two_blocks();
  fake f = { .pending_left = 2 };
  sp_transport t = { &fake_ops, &f };
  GError *err = NULL;
  sp_exec *e = sp_exec_new(p, &t, NULL, NULL);
  g_assert_cmpint(sp_exec_resume(e, &err), ==, SP_WAIT_PENDING);
  g_assert_no_error(err);
  g_assert_cmpint(f.sends, ==, 2);
  g_assert_cmpint(sp_exec_resume(e, &err), ==, SP_WAIT_PENDING);
  g_assert_cmpint(f.sends, ==, 2); /* nothing posted twice */
  g_assert_cmpint(f.recvs, ==, 1);
  g_assert_cmpint(sp_exec_resume(e, &err), ==, SP_WAIT_DONE);
  g_assert_no_error(err);
  g_assert_cmpint(f.waits, ==, 4); /* 2 pending answers + 2 blocks */
  g_assert_cmpint(f.recvs, ==, 2);
  g_assert_cmpint(f.locals, ==, 2);
  sp_exec_free(e);

  /* a blocking run on a transport that answers PENDING is an error */
  fake g = { .pending_left = 1 };
  sp_transport t2 = { &fake_ops, &g };
  g_assert_false(sp_exec_run(p, &t2, NULL, NULL, &err));
  g_assert_error(err, SP_ERROR, SP_ERROR_TRANSPORT);
  g_assert_nonnull(strstr(err->message, "cannot block"));
  g_clear_error(&err);

  /* transport errors propagate and stick */
  fake h = { .fail_send = TRUE };
  sp_transport t3 = { &fake_ops, &h };
  e = sp_exec_new(p, &t3, NULL, NULL);
  g_assert_cmpint(sp_exec_resume(e, &err), ==, SP_WAIT_ERROR);
  g_assert_nonnull(strstr(err->message, "peer 1 is gone"));
  g_clear_error(&err);
  g_assert_cmpint(sp_exec_resume(e, &err), ==, SP_WAIT_ERROR);
  g_clear_error(&err);
  sp_exec_free(e);
  sp_program_free(p);
}

static void test_exec_host_fallback(void)
{
  /* no local op: data mode runs the host kernel, cost mode skips it */
  sp_program *p = sp_program_new(0);
  sp_program_add_buffer(p, 8, "a");
  add(p, (sp_step){ .kind = SP_STEP_FILL, .dst = { 0, 2 }, .bytes = 3, .fill_byte = 7 });
  add(p, (sp_step){ .kind = SP_STEP_SCALE, .dst = { 0, 0 }, .count = 8, .dtype = SP_U8,
                    .scale = 3 });
  fake f = { 0 };
  sp_transport t = { &fake_ops_nolocal, &f };
  guchar a[8] = { 1, 1, 1, 1, 1, 1, 1, 1 };
  void *bufs[1] = { a };
  GError *err = NULL;
  g_assert_true(sp_exec_run(p, &t, bufs, NULL, &err));
  g_assert_no_error(err);
  const guchar expect[8] = { 3, 3, 21, 21, 21, 3, 3, 3 };
  g_assert_cmpmem(a, 8, expect, 8);
  g_assert_true(sp_exec_run(p, &t, NULL, NULL, &err));
  g_assert_no_error(err);
  /* an invalid program is refused before anything is posted */
  add(p, (sp_step){ .kind = SP_STEP_FILL, .dst = { 0, 6 }, .bytes = 3 });
  g_assert_false(sp_exec_run(p, &t, bufs, NULL, &err));
  g_assert_error(err, SP_ERROR, SP_ERROR_INVALID);
  g_clear_error(&err);
  g_assert_cmpmem(a, 8, expect, 8);
  sp_program_free(p);
}

/* ------------------------------------------------------------ Chrome trace */

static JsonNode *parse_file(const char *path)
{
  JsonParser *parser = json_parser_new();
  GError *err = NULL;
  g_assert_true(json_parser_load_from_file(parser, path, &err));
  g_assert_no_error(err);
  JsonNode *root = json_node_copy(json_parser_get_root(parser));
  g_object_unref(parser);
  return root;
}

static void test_trace_json(void)
{
  sp_trace *tr = sp_trace_new();
  /* added out of order on purpose */
  sp_trace_event evs[] = {
    { .rank = 1, .op = 3, .phase = 0, .kind = SP_STEP_WAIT, .start = 2e-6, .end = 5e-6, .bytes = 64 },
    { .rank = 0, .op = 4, .phase = 2, .kind = SP_STEP_COPY, .start = 1e-6, .end = 1.5e-6, .bytes = 8 },
    { .rank = 0, .op = 3, .phase = 1, .kind = SP_STEP_WAIT, .start = 0, .end = 1e-6, .bytes = 128 },
    { .rank = 1, .op = 2, .phase = 0, .kind = SP_STEP_COMPUTE, .start = 2e-6, .end = 3e-6 },
  };
  for (size_t i = 0; i < G_N_ELEMENTS(evs); i++)
    sp_trace_add(tr, &evs[i]);
  sp_trace_set_op_name(tr, 3, "allreduce");
  g_assert_cmpuint(sp_trace_len(tr), ==, 4);

  g_autofree char *dir = g_dir_make_tmp("spsim-trace-XXXXXX", NULL);
  g_assert_nonnull(dir);
  g_autofree char *path = g_build_filename(dir, "t.json", NULL);
  g_autofree char *path2 = g_build_filename(dir, "t2.json", NULL);
  GError *err = NULL;
  g_assert_true(sp_trace_write_chrome(tr, path, &err));
  g_assert_no_error(err);

  JsonNode *root = parse_file(path);
  JsonObject *o = json_node_get_object(root);
  g_assert_cmpstr(json_object_get_string_member(o, "displayTimeUnit"), ==, "ns");
  JsonArray *a = json_object_get_array_member(o, "traceEvents");
  g_assert_cmpuint(json_array_get_length(a), ==, 2 + 4); /* two thread names + four events */

  JsonObject *m0 = json_array_get_object_element(a, 0);
  g_assert_cmpstr(json_object_get_string_member(m0, "ph"), ==, "M");
  g_assert_cmpstr(json_object_get_string_member(m0, "name"), ==, "thread_name");
  g_assert_cmpint(json_object_get_int_member(m0, "tid"), ==, 0);
  g_assert_cmpstr(json_object_get_string_member(json_object_get_object_member(m0, "args"), "name"),
                  ==, "rank 0");
  JsonObject *m1 = json_array_get_object_element(a, 1);
  g_assert_cmpstr(json_object_get_string_member(json_object_get_object_member(m1, "args"), "name"),
                  ==, "rank 1");

  /* sorted by (rank, start, op): r0 allreduce@0, r0 op4@1, r1 op2@2, r1 allreduce@2 */
  static const struct {
    int tid;
    const char *name, *cat;
    double ts, dur;
    int bytes, phase;
  } want[] = {
    { 0, "allreduce", "wait", 0.0, 1.0, 128, 1 },
    { 0, "op4", "copy", 1.0, 0.5, 8, 2 },
    { 1, "op2", "compute", 2.0, 1.0, 0, 0 },
    { 1, "allreduce", "wait", 2.0, 3.0, 64, 0 },
  };
  for (guint i = 0; i < 4; i++) {
    JsonObject *e = json_array_get_object_element(a, 2 + i);
    g_assert_cmpstr(json_object_get_string_member(e, "ph"), ==, "X");
    g_assert_cmpint(json_object_get_int_member(e, "pid"), ==, 0);
    g_assert_cmpint(json_object_get_int_member(e, "tid"), ==, want[i].tid);
    g_assert_cmpstr(json_object_get_string_member(e, "name"), ==, want[i].name);
    g_assert_cmpstr(json_object_get_string_member(e, "cat"), ==, want[i].cat);
    g_assert_cmpfloat_with_epsilon(json_object_get_double_member(e, "ts"), want[i].ts, 1e-9);
    g_assert_cmpfloat_with_epsilon(json_object_get_double_member(e, "dur"), want[i].dur, 1e-9);
    JsonObject *args = json_object_get_object_member(e, "args");
    g_assert_cmpint(json_object_get_int_member(args, "bytes"), ==, want[i].bytes);
    g_assert_cmpint(json_object_get_int_member(args, "phase"), ==, want[i].phase);
  }
  json_node_unref(root);

  /* deterministic: same trace, same bytes */
  g_assert_true(sp_trace_write_chrome(tr, path2, &err));
  g_autofree char *c1 = NULL, *c2 = NULL;
  gsize l1 = 0, l2 = 0;
  g_assert_true(g_file_get_contents(path, &c1, &l1, NULL));
  g_assert_true(g_file_get_contents(path2, &c2, &l2, NULL));
  g_assert_cmpmem(c1, l1, c2, l2);

  /* unwritable path: an IO error, not a crash */
  g_autofree char *bad = g_build_filename(dir, "no-such-dir", "t.json", NULL);
  g_assert_false(sp_trace_write_chrome(tr, bad, &err));
  g_assert_error(err, SP_ERROR, SP_ERROR_IO);
  g_assert_nonnull(strstr(err->message, "no-such-dir"));
  g_clear_error(&err);

  g_unlink(path);
  g_unlink(path2);
  g_rmdir(dir);
  sp_trace_free(tr);
}

/* Op names reach the JSON escaped (quote, backslash, control character) and as
 * valid UTF-8 (a byte that is not becomes U+FFFD), so any name gives a document
 * that parses back to the same text. */
static void test_trace_names_escaped(void)
{
  sp_trace *tr = sp_trace_new();
  sp_trace_event e0 = { .rank = 0, .op = 1, .kind = SP_STEP_WAIT, .start = 0, .end = 1e-6 };
  sp_trace_event e1 = { .rank = 0, .op = 2, .kind = SP_STEP_WAIT, .start = 1e-6, .end = 2e-6 };
  sp_trace_add(tr, &e0);
  sp_trace_add(tr, &e1);
  sp_trace_set_op_name(tr, 1, "a\"b\\c\td\001");
  sp_trace_set_op_name(tr, 2, "x\377y");
  g_autofree char *dir = g_dir_make_tmp("spsim-trace-XXXXXX", NULL);
  g_autofree char *path = g_build_filename(dir, "n.json", NULL);
  g_assert_true(sp_trace_write_chrome(tr, path, NULL));
  g_autofree char *text = NULL;
  g_assert_true(g_file_get_contents(path, &text, NULL, NULL));
  g_assert_true(g_utf8_validate(text, -1, NULL));
  g_assert_nonnull(strstr(text, "\"name\":\"a\\\"b\\\\c\\td\\u0001\""));
  JsonNode *root = parse_file(path);
  JsonArray *a = json_object_get_array_member(json_node_get_object(root), "traceEvents");
  g_assert_cmpuint(json_array_get_length(a), ==, 1 + 2);
  g_assert_cmpstr(json_object_get_string_member(json_array_get_object_element(a, 1), "name"), ==,
                  "a\"b\\c\td\001");
  g_assert_cmpstr(json_object_get_string_member(json_array_get_object_element(a, 2), "name"), ==,
                  "x\357\277\275y");
  json_node_unref(root);
  g_unlink(path);
  g_rmdir(dir);
  sp_trace_free(tr);
}

/* The executor's events of a real run come out as one JSON event per block/step. */
static void test_trace_from_exec(void)
{
  sp_program *p = two_blocks();
  fake f = { 0 };
  sp_transport t = { &fake_ops, &f };
  sp_trace *tr = sp_trace_new();
  g_assert_true(sp_exec_run(p, &t, NULL, tr, NULL));
  g_autofree char *dir = g_dir_make_tmp("spsim-trace-XXXXXX", NULL);
  g_autofree char *path = g_build_filename(dir, "x.json", NULL);
  g_assert_true(sp_trace_write_chrome(tr, path, NULL));
  JsonNode *root = parse_file(path);
  JsonArray *a = json_object_get_array_member(json_node_get_object(root), "traceEvents");
  g_assert_cmpuint(json_array_get_length(a), ==, 1 + 4);
  JsonObject *e = json_array_get_object_element(a, 4);
  g_assert_cmpstr(json_object_get_string_member(e, "cat"), ==, "reduce");
  g_assert_cmpfloat_with_epsilon(json_object_get_double_member(e, "ts"), 2.5e6, 1e-6);
  g_assert_cmpfloat_with_epsilon(json_object_get_double_member(e, "dur"), 0.5e6, 1e-6);
  json_node_unref(root);
  g_unlink(path);
  g_rmdir(dir);
  sp_trace_free(tr);
  sp_program_free(p);
}

int main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/loopback/ring-strided", test_ring);
  g_test_add_func("/loopback/ring-allgather", test_ring_allgather);
  g_test_add_func("/loopback/deadlock", test_deadlock);
  g_test_add_func("/loopback/deadlock-many", test_deadlock_many);
  g_test_add_func("/loopback/reverse-relay", test_reverse_relay);
  g_test_add_func("/loopback/mismatch", test_mismatch);
  g_test_add_func("/loopback/ordering", test_ordering);
  g_test_add_func("/exec/trace-events", test_exec_trace);
  g_test_add_func("/exec/pending", test_exec_pending);
  g_test_add_func("/exec/host-fallback", test_exec_host_fallback);
  g_test_add_func("/trace/chrome-json", test_trace_json);
  g_test_add_func("/trace/from-exec", test_trace_from_exec);
  g_test_add_func("/trace/names-escaped", test_trace_names_escaped);
  return g_test_run();
}
