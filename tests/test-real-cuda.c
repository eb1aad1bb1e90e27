/* The CUDA kernels of the real backend against the host kernels of src/core,
 * bitwise, on random bytes mixed with edge values (NaNs with payloads,
 * infinities, subnormals, signed zeros, integer limits) for every dtype and
 * operator and odd sizes. Prints TAP. Built twice:
 *   test-real-cuda        on the GPU; with no usable GPU (CI) it prints
 *                         "1..0 # SKIP no GPU";
 *   test-kernels-fakegpu  on the fake device (tests/fakegpu), which runs the
 *                         kernels' element code (src/nccl/kernel_ops.h) on the
 *                         host: same bits, no GPU needed.
 *   test-real-cuda --bench  throughput of reduce/copy/pack kernels as a fraction
 *                           of the measured device-to-device copy bandwidth */
#include "config.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "kernels.h"
#include "spsim/dtype.h"
#include "spsim/program.h"

static int n_test;

static void tap(gboolean ok, const char *fmt, ...) G_GNUC_PRINTF(2, 3);
static void tap(gboolean ok, const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  g_autofree char *msg = g_strdup_vprintf(fmt, ap);
  va_end(ap);
  printf("%s %d - %s\n", ok ? "ok" : "not ok", ++n_test, msg);
  fflush(stdout);
}

#define CK(call)                                                                               \
  do {                                                                                         \
    cudaError_t e_ = (call);                                                                   \
    if (e_ != cudaSuccess) {                                                                   \
      printf("Bail out! %s failed: %s\n", #call, cudaGetErrorString(e_));                      \
      exit(1);                                                                                 \
    }                                                                                          \
  } while (0)

static void random_bytes(GRand *r, void *p, size_t n)
{
  unsigned char *b = p;
  for (size_t i = 0; i < n; i++)
    b[i] = (unsigned char)g_rand_int_range(r, 0, 256);
}

/* Random bytes with a quarter of the elements replaced by edge values of the
 * type (signed zeros, infinities, NaNs, extremes, subnormals; integer limits),
 * so pairs such as (+0, -0) in MAX/MIN or INT_MIN / -1 in SCALE do occur. */
static void random_values(GRand *r, void *p, size_t n, sp_dtype t)
{
  static const uint32_t f32[] = { 0x00000000u, 0x80000000u, 0x7f800000u, 0xff800000u,
                                  0x7fc00000u, 0x7f800001u, 0x7f7fffffu, 0xff7fffffu,
                                  0x00000001u, 0x807fffffu, 0x3f800000u, 0xbf800000u };
  static const uint16_t f16[] = { 0x0000, 0x8000, 0x7c00, 0xfc00, 0x7e00, 0x7c01,
                                  0x7bff, 0xfbff, 0x0001, 0x83ff, 0x3c00, 0xbc00 };
  static const uint16_t bf16[] = { 0x0000, 0x8000, 0x7f80, 0xff80, 0x7fc0, 0x7f81,
                                   0x7f7f, 0xff7f, 0x0001, 0x807f, 0x3f80, 0xbf80 };
  static const int64_t ints[] = { 0, 1, -1, INT64_MIN, INT64_MAX, INT32_MIN, INT32_MAX, 255 };
  size_t es = sp_dtype_size(t);
  random_bytes(r, p, n * es);
  for (size_t i = 0; i < n; i++) {
    if (g_rand_int_range(r, 0, 4) != 0)
      continue;
    unsigned char *e = (unsigned char *)p + i * es;
    switch (t) {
    case SP_F32: memcpy(e, &f32[g_rand_int_range(r, 0, G_N_ELEMENTS(f32))], 4); break;
    case SP_F16: memcpy(e, &f16[g_rand_int_range(r, 0, G_N_ELEMENTS(f16))], 2); break;
    case SP_BF16: memcpy(e, &bf16[g_rand_int_range(r, 0, G_N_ELEMENTS(bf16))], 2); break;
    default: { /* the integer's low bytes (little endian): limits of every width */
      int64_t v = ints[g_rand_int_range(r, 0, G_N_ELEMENTS(ints))];
      if (t == SP_I32)
        v = v == INT64_MIN ? INT32_MIN : v == INT64_MAX ? INT32_MAX : v;
      memcpy(e, &v, es);
    }
    }
  }
}

/* First differing byte, or -1. */
static long first_diff(const void *a, const void *b, size_t n)
{
  const unsigned char *x = a, *y = b;
  for (size_t i = 0; i < n; i++)
    if (x[i] != y[i])
      return (long)i;
  return -1;
}

static const uint64_t sizes[] = { 1, 3, 31, 257, 4099, (1u << 20) + 7 };

/* dst op= src on both sides, compare: at aligned addresses (the 16-byte vector
 * kernel and its scalar tail), with both operands one element off (the scalar
 * kernel) and with one of them off. */
static void test_reduce(GRand *r, sp_dtype t, sp_redop op)
{
  size_t es = sp_dtype_size(t);
  const size_t offs[][2] = { { 0, 0 }, { es, es }, { 0, es } };
  gboolean ok = TRUE;
  char where[160] = "";
  for (size_t k = 0; k < G_N_ELEMENTS(sizes) && ok; k++) {
    for (size_t o = 0; o < G_N_ELEMENTS(offs) && ok; o++) {
      uint64_t n = sizes[k];
      size_t bytes = n * es;
      unsigned char *d = g_malloc(bytes), *s = g_malloc(bytes), *got = g_malloc(bytes);
      random_values(r, d, n, t);
      random_values(r, s, n, t);
      char *dd, *ds;
      CK(cudaMalloc((void **)&dd, bytes + 16));
      CK(cudaMalloc((void **)&ds, bytes + 16));
      CK(cudaMemcpy(dd + offs[o][0], d, bytes, cudaMemcpyHostToDevice));
      CK(cudaMemcpy(ds + offs[o][1], s, bytes, cudaMemcpyHostToDevice));
      CK(sp_cuda_reduce(dd + offs[o][0], ds + offs[o][1], n, (int)t, (int)op, 0));
      CK(cudaMemcpy(got, dd + offs[o][0], bytes, cudaMemcpyDeviceToHost));
      sp_reduce_host(d, s, n, t, op);
      long at = first_diff(got, d, bytes);
      if (at >= 0) {
        ok = FALSE;
        g_snprintf(where, sizeof where,
                   " (count %" G_GUINT64_FORMAT ", offsets %zu/%zu bytes: first difference at byte %ld)",
                   n, offs[o][0], offs[o][1], at);
      }
      cudaFree(dd);
      cudaFree(ds);
      g_free(d);
      g_free(s);
      g_free(got);
    }
  }
  tap(ok, "reduce %s %s bitwise equal to the host%s", sp_dtype_name(t), sp_redop_name(op), where);
}

static void test_scale(GRand *r, sp_dtype t)
{
  static const double factors[] = { 3.0, 0.5, -1.0, 0.0, 7.25, 1e10, -3e-3 };
  size_t es = sp_dtype_size(t);
  gboolean ok = TRUE;
  char where[160] = "";
  for (size_t k = 0; k < G_N_ELEMENTS(sizes) && ok; k++)
    for (size_t f = 0; f < G_N_ELEMENTS(factors) && ok; f++)
      for (int divide = 0; divide < 2 && ok; divide++) {
        uint64_t n = sizes[k];
        size_t bytes = n * es;
        unsigned char *x = g_malloc(bytes), *got = g_malloc(bytes);
        random_values(r, x, n, t);
        void *dx;
        CK(cudaMalloc(&dx, bytes));
        CK(cudaMemcpy(dx, x, bytes, cudaMemcpyHostToDevice));
        double fac = factors[f];
        int64_t ik = (int64_t)fac; /* the factors above are in range */
        CK(sp_cuda_scale(dx, n, (int)t, (float)fac, ik, divide, 0));
        CK(cudaMemcpy(got, dx, bytes, cudaMemcpyDeviceToHost));
        sp_scale_host(x, n, t, fac, divide);
        long at = first_diff(got, x, bytes);
        if (at >= 0) {
          ok = FALSE;
          g_snprintf(where, sizeof where, " (count %" G_GUINT64_FORMAT ", %s %g: byte %ld)", n,
                     divide ? "divide by" : "times", fac, at);
        }
        cudaFree(dx);
        g_free(x);
        g_free(got);
      }
  tap(ok, "scale %s bitwise equal to the host%s", sp_dtype_name(t), where);
}

/* Strided copies (pack, unpack, odd row sizes and alignments) against sp_pack_host/sp_unpack_host. */
static void test_copy2d(GRand *r)
{
  static const uint64_t shapes[][3] = { /* rows, row_bytes, stride */
    { 1, 1, 1 }, { 3, 5, 7 }, { 17, 16, 48 }, { 9, 64, 64 }, { 33, 100, 4096 }, { 1000, 3, 11 },
    { 4, 65536, 131072 },
  };
  gboolean ok = TRUE;
  char where[128] = "";
  for (size_t k = 0; k < G_N_ELEMENTS(shapes) && ok; k++) {
    uint64_t rows = shapes[k][0], rb = shapes[k][1], st = shapes[k][2];
    size_t span = (size_t)((rows - 1) * st + rb), packed = (size_t)(rows * rb);
    for (uint64_t off = 0; off < 2 && ok; off++) { /* aligned and misaligned bases */
      unsigned char *base = g_malloc(span + 1), *want = g_malloc(packed), *got = g_malloc(packed);
      unsigned char *base2 = g_malloc(span + 1), *got2 = g_malloc(span + 1);
      random_bytes(r, base, span + 1);
      memcpy(base2, base, span + 1);
      unsigned char *dbase, *dpack;
      CK(cudaMalloc((void **)&dbase, span + 1));
      CK(cudaMalloc((void **)&dpack, packed));
      CK(cudaMemcpy(dbase, base, span + 1, cudaMemcpyHostToDevice));
      CK(sp_cuda_copy2d(dpack, rb, dbase + off, st, rows, rb, 0)); /* pack */
      CK(cudaMemcpy(got, dpack, packed, cudaMemcpyDeviceToHost));
      sp_pack_host(want, base + off, rows, rb, st);
      if (first_diff(got, want, packed) >= 0) {
        ok = FALSE;
        g_snprintf(where, sizeof where, " (pack %" G_GUINT64_FORMAT "x%" G_GUINT64_FORMAT
                   " stride %" G_GUINT64_FORMAT ")", rows, rb, st);
      }
      /* unpack a reversed payload back into the strided region */
      for (size_t i = 0; i < packed / 2; i++) {
        unsigned char tmp = want[i];
        want[i] = want[packed - 1 - i];
        want[packed - 1 - i] = tmp;
      }
      CK(cudaMemcpy(dpack, want, packed, cudaMemcpyHostToDevice));
      CK(sp_cuda_copy2d(dbase + off, st, dpack, rb, rows, rb, 0));
      CK(cudaMemcpy(got2, dbase, span + 1, cudaMemcpyDeviceToHost));
      sp_unpack_host(base2 + off, want, rows, rb, st);
      if (ok && first_diff(got2, base2, span + 1) >= 0) {
        ok = FALSE;
        g_snprintf(where, sizeof where, " (unpack %" G_GUINT64_FORMAT "x%" G_GUINT64_FORMAT
                   " stride %" G_GUINT64_FORMAT ")", rows, rb, st);
      }
      cudaFree(dbase);
      cudaFree(dpack);
      g_free(base);
      g_free(base2);
      g_free(want);
      g_free(got);
      g_free(got2);
    }
  }
  tap(ok, "strided copy (pack/unpack) equal to the host%s", where);
}

/* ------------------------------------------------------------ --bench */

static double time_ms(cudaEvent_t a, cudaEvent_t b)
{
  float ms = 0;
  CK(cudaEventElapsedTime(&ms, a, b));
  return ms;
}

static int bench(void)
{
  const size_t bytes = (size_t)256 << 20;
  void *a, *b;
  CK(cudaMalloc(&a, bytes));
  CK(cudaMalloc(&b, bytes));
  CK(cudaMemset(a, 0, bytes));
  CK(cudaMemset(b, 0, bytes));
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  const int iters = 20;
  struct cudaDeviceProp prop;
  int dev = 0;
  CK(cudaGetDevice(&dev));
  CK(cudaGetDeviceProperties(&prop, dev));
  printf("# %s, %zu MiB buffers, %d iterations; GB/s = 1e9 bytes/s of memory traffic\n", prop.name,
         bytes >> 20, iters);
  /* reference: cudaMemcpy device to device (reads + writes) */
  CK(cudaMemcpy(b, a, bytes, cudaMemcpyDeviceToDevice));
  CK(cudaEventRecord(e0, 0));
  for (int i = 0; i < iters; i++)
    CK(cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice, 0));
  CK(cudaEventRecord(e1, 0));
  CK(cudaEventSynchronize(e1));
  double d2d = 2.0 * bytes * iters / (time_ms(e0, e1) * 1e-3) / 1e9;
  printf("%-28s %9.1f GB/s  %5.1f%%\n", "cudaMemcpy D2D", d2d, 100.0);
  struct {
    const char *name;
    int kind; /* 0 copy, 1 pack, 2 reduce */
    int dtype;
  } cases[] = {
    { "copy (contiguous kernel)", 0, 0 }, { "pack (rows 4 KiB, stride 8K)", 1, 0 },
    { "reduce f32 sum", 2, SP_F32 },      { "reduce bf16 sum", 2, SP_BF16 },
    { "reduce f16 sum", 2, SP_F16 },      { "reduce i32 sum", 2, SP_I32 },
  };
  for (size_t k = 0; k < G_N_ELEMENTS(cases); k++) {
    double traffic;
    for (int i = -1; i < iters; i++) {
      if (i == 0)
        CK(cudaEventRecord(e0, 0));
      switch (cases[k].kind) {
      case 0: CK(sp_cuda_copy2d(b, bytes, a, bytes, 1, bytes, 0)); break;
      case 1: CK(sp_cuda_copy2d(b, 4096, a, 8192, bytes / 8192, 4096, 0)); break;
      default: {
        size_t es = sp_dtype_size((sp_dtype)cases[k].dtype);
        CK(sp_cuda_reduce(b, a, bytes / es, cases[k].dtype, SP_RED_SUM, 0));
      }
      }
    }
    CK(cudaEventRecord(e1, 0));
    CK(cudaEventSynchronize(e1));
    traffic = cases[k].kind == 0 ? 2.0 * bytes : cases[k].kind == 1 ? (double)bytes : 3.0 * bytes;
    double bw = traffic * iters / (time_ms(e0, e1) * 1e-3) / 1e9;
    printf("%-28s %9.1f GB/s  %5.1f%%\n", cases[k].name, bw, 100.0 * bw / d2d);
  }
  cudaFree(a);
  cudaFree(b);
  return 0;
}

int main(int argc, char **argv)
{
  int ndev = 0;
  cudaError_t e = cudaGetDeviceCount(&ndev);
  if (e != cudaSuccess || ndev < 1) {
    printf("1..0 # SKIP no GPU (%s)\n", e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
    return 0;
  }
  if (argc > 1 && strcmp(argv[1], "--bench") == 0)
    return bench();
  GRand *r = g_rand_new_with_seed(20240611);
  printf("1..%d\n", SP_DTYPE_COUNT * SP_REDOP_COUNT + SP_DTYPE_COUNT + 1);
  for (int t = 0; t < SP_DTYPE_COUNT; t++)
    for (int op = 0; op < SP_REDOP_COUNT; op++)
      test_reduce(r, (sp_dtype)t, (sp_redop)op);
  for (int t = 0; t < SP_DTYPE_COUNT; t++)
    test_scale(r, (sp_dtype)t);
  test_copy2d(r);
  g_rand_free(r);
  return 0;
}
