/* NCCL tuner plugins: aws-ofi-nccl's region tuner for p5, p5en and p6 (see spsim/tuner_plugin.h). */
#include "spsim/tuner_plugin.h"

#include <math.h>
#include <string.h>

static const char *const tuner_names[SP_TUNER_COUNT] = { "none", "aws-p5", "aws-p5en", "aws-p6" };

const char *sp_tuner_list(void)
{
  return "aws-p5, aws-p5en, aws-p6 or none";
}

const char *sp_tuner_name(sp_tuner t)
{
  return t >= 0 && t < SP_TUNER_COUNT ? tuner_names[t] : "?";
}

gboolean sp_tuner_parse(const char *s, sp_tuner *out)
{
  for (int i = 0; s != NULL && i < SP_TUNER_COUNT; i++)
    if (g_ascii_strcasecmp(s, tuner_names[i]) == 0) {
      *out = (sp_tuner)i;
      return TRUE;
    }
  return FALSE;
}

/* A point of the plane: x message bytes, y ranks. */
typedef struct {
  double x, y;
} pt;

/* The plugin's bounds of the plane (TUNER_MAX_SIZE, TUNER_MAX_RANKS). */
#define MAX_BYTES (100.0 * 1024 * 1024 * 1024)
#define MAX_RANKS (1024.0 * 1024)

#define MAX_VERTS 20
typedef struct {
  sp_algo algo;
  sp_proto proto;
  int32_t n;
  pt v[MAX_VERTS];
} region;

/* The plugin carries a boundary on from its last two measured points a, b to the edge of
 * the plane: the line through them, where it leaves the box [0, MAX_BYTES] x [0, MAX_RANKS]
 * (vertical: at MAX_RANKS; horizontal: at MAX_BYTES). */
static pt extend(pt a, pt b)
{
  if (a.x == b.x)
    return (pt){ a.x, MAX_RANKS };
  if (a.y == b.y)
    return (pt){ MAX_BYTES, a.y };
  double m = (a.y - b.y) / (a.x - b.x), c = b.y - m * b.x, y = m * MAX_BYTES + c;
  return y < MAX_RANKS ? (pt){ MAX_BYTES, y } : (pt){ (MAX_RANKS - c) / m, MAX_RANKS };
}

/* p on the segment a-b: at a distance under 1e-10 (bytes, ranks) from it, as the plugin
 * tests it. The cross product is exact in long double for the plugin's integer vertices
 * (products below 2^64), so a point one byte off an edge is not on it. */
static gboolean on_segment(pt p, pt a, pt b)
{
  long double dx = (long double)b.x - a.x, dy = (long double)b.y - a.y;
  long double len2 = dx * dx + dy * dy;
  if (len2 == 0)
    return p.x == a.x && p.y == a.y;
  long double cross = ((long double)p.x - a.x) * dy - ((long double)p.y - a.y) * dx;
  if (cross * cross >= 1e-20L * len2)
    return FALSE;
  long double s = (((long double)p.x - a.x) * dx + ((long double)p.y - a.y) * dy) / len2;
  return s >= 0 && s <= 1;
}

/* Inside the polygon or on its edge (the plugin's is_inside_region >= 0): edges first,
 * then the even-odd rule along a ray towards +x. */
static gboolean in_region(pt p, const region *r)
{
  for (int32_t i = 0; i < r->n; i++)
    if (on_segment(p, r->v[i], r->v[(i + 1) % r->n]))
      return TRUE;
  gboolean in = FALSE;
  for (int32_t i = 0; i < r->n; i++) {
    pt a = r->v[i], b = r->v[(i + 1) % r->n];
    if ((a.y > p.y) != (b.y > p.y) && p.x < a.x + (p.y - a.y) * (b.x - a.x) / (b.y - a.y))
      in = !in;
  }
  return in;
}

#define R(a, p) SP_ALGO_##a, SP_PROTO_##p

/* P5/P5e, 8 GPUs per node, all-reduce (region_init_internal_p5_p5e, nRanks == 8 nNodes). */
static int32_t p5_ar8(region *r)
{
  pt tree_ll128 = extend((pt){ 402653184, 2048 }, (pt){ 402653184, 4096 });
  pt nvlstree_1 = extend((pt){ 8053063680, 160 }, (pt){ 9663676416, 192 });
  pt nvlstree_2 = extend((pt){ 402653184, 2048 }, (pt){ 402653184, 4096 });
  pt ring_simple = extend((pt){ 8053063680, 160 }, (pt){ 9663676416, 192 });
  const region t[] = {
    { R(TREE, LL128), 12,
      { { 0, 16 }, { 31457280, 16 }, { 37748736, 32 }, { 117440512, 64 }, { 301989888, 128 },
        { 301989888, 256 }, { 335544320, 512 }, { 536870912, 1024 }, { 402653184, 2048 },
        { 402653184, 4096 }, tree_ll128, { 0, tree_ll128.y } } },
    { R(NVLS_TREE, SIMPLE), 3, { { 31457281, 16 }, { MAX_BYTES, 16 }, { 31457281, 16 } } },
    { R(RING, LL128), 11,
      { { 31457280, 17 }, { 1073741824, 17 }, { 2147483648, 64 }, { 2147483648, 128 },
        { 1342177280, 160 }, { 2147483648, 256 }, { 1074790400, 256 }, { 444596224, 160 },
        { 301989888, 128 }, { 117440512, 64 }, { 37748736, 32 } } },
    { R(NVLS_TREE, SIMPLE), 17,
      { { 2147483648, 128 }, { 6442450944, 128 }, { 8053063680, 160 }, { 9663676416, 192 },
        nvlstree_1, nvlstree_2, { 402653184, 4096 }, { 402653184, 2048 }, { 536870912, 1024 },
        { 335544320, 512 }, { 301989888, 256 }, { 310378496, 160 }, { 444596224, 160 },
        { 1074790400, 256 }, { 2684354560, 256 }, { 2147483648, 224 }, { 1342177280, 160 } } },
    { R(RING, SIMPLE), 7,
      { { 1073741824, 17 }, { ring_simple.x, 17 }, ring_simple, { 9663676416, 192 },
        { 8053063680, 160 }, { 2684354560, 64 }, { 1610612736, 32 } } },
  };
  memcpy(r, t, sizeof t);
  return G_N_ELEMENTS(t);
}

/* P5/P5e, 2 GPUs per node, all-reduce (nRanks == 2 nNodes). */
static int32_t p5_ar2(region *r)
{
  pt tree_ll128 = extend((pt){ 88160256, 128 }, (pt){ 178163712, 256 });
  pt tree_simple_1 = extend((pt){ 787480576, 128 }, (pt){ 1073741824, 256 });
  pt tree_simple_2 = extend((pt){ 257114112, 128 }, (pt){ 269484032, 256 });
  pt nvlstree = extend((pt){ 787480576, 128 }, (pt){ 1073741824, 256 });
  const region t[] = {
    { R(TREE, LL128), 11,
      { { 0, 4 }, { 1314816, 4 }, { 1051648, 8 }, { 1051648, 12 }, { 2367488, 16 },
        { 5525504, 32 }, { 9473024, 64 }, { 88160256, 128 }, { 178163712, 256 }, tree_ll128,
        { 0, tree_ll128.y } } },
    { R(RING, LL128), 14,
      { { 1314816, 4 }, { 19736576, 4 }, { 41842688, 8 }, { 296747008, 64 }, { 257114112, 128 },
        { 269484032, 256 }, { 178163712, 256 }, { 88160256, 128 }, { 9473024, 64 },
        { 5525504, 32 }, { 2367488, 16 }, { 1051648, 12 }, { 1051648, 8 }, { 1314816, 4 } } },
    { R(NVLS_TREE, SIMPLE), 6,
      { { 19736576, 4 }, { 81844224, 4 }, { 275775488, 8 }, { 275775488, 48 }, { 296747008, 64 },
        { 41842688, 8 } } },
    { R(TREE, LL128), 3, { { 81844224, 4 }, { 269484032, 4 }, { 81844224, 4 } } },
    { R(TREE, SIMPLE), 3, { { 269484032, 4 }, { MAX_BYTES, 4 }, { 269484032, 4 } } },
    { R(RING, SIMPLE), 10,
      { { 81844224, 5 }, { MAX_BYTES, 5 }, { MAX_BYTES, 32 }, { 1073741824, 40 },
        { 1073741824, 128 }, { 787480576, 128 }, { 296747008, 64 }, { 275775488, 48 },
        { 275775488, 8 }, { 81844224, 5 } } },
    { R(TREE, SIMPLE), 7,
      { { 296747008, 64 }, { 787480576, 128 }, { 1073741824, 256 }, tree_simple_1, tree_simple_2,
        { 269484032, 256 }, { 257114112, 128 } } },
    { R(NVLS_TREE, SIMPLE), 6,
      { nvlstree, { 1073741824, 256 }, { 787480576, 128 }, { 1073741824, 128 }, { 1073741824, 40 },
        { MAX_BYTES, 32 } } },
  };
  memcpy(r, t, sizeof t);
  return G_N_ELEMENTS(t);
}

/* P5/P5e, 1 GPU per node (nRanks == nNodes): all-reduce, all-gather, reduce-scatter. */
static int32_t p5_one(sp_coll coll, region *r)
{
  if (coll == SP_COLL_ALL_REDUCE) {
    pt tree_ll128 = extend((pt){ 9999360, 64 }, (pt){ 119477248, 128 });
    pt ring_ll128 = extend((pt){ 4736000, 2 }, (pt){ 269484032, 128 });
    const region t[] = {
      { R(TREE, LL128), 5, { { 0, 16 }, { 2367488, 16 }, { 9999360, 64 }, { 119477248, 128 }, tree_ll128 } },
      { R(RING, LL128), 9,
        { { 0, 2 }, { 4736000, 2 }, { 269484032, 128 }, ring_ll128, tree_ll128, { 119477248, 128 },
          { 9999360, 64 }, { 2367488, 16 }, { 0, 16 } } },
      { R(RING, SIMPLE), 4, { { 4736000, 2 }, { MAX_BYTES, 2 }, ring_ll128, { 269484032, 128 } } },
    };
    memcpy(r, t, sizeof t);
    return G_N_ELEMENTS(t);
  }
  if (coll == SP_COLL_ALL_GATHER || coll == SP_COLL_REDUCE_SCATTER) {
    gboolean ag = coll == SP_COLL_ALL_GATHER;
    pt a = ag ? (pt){ 4194304, 2 } : (pt){ 8388608, 2 };
    pt b = ag ? (pt){ 8589934592, 2048 } : (pt){ 4294967296, 1024 };
    pt e = extend(a, b);
    const region t[] = { { R(RING, SIMPLE), 4, { a, { MAX_BYTES, 2 }, e, b } } };
    memcpy(r, t, sizeof t);
    return 1;
  }
  return 0;
}

/* P5en, 8 GPUs per node (region_init_internal_p5en, nRanks == 8 nNodes): all-reduce;
 * all-gather and reduce-scatter share one set. */
static int32_t p5en_8(sp_coll coll, region *r)
{
  if (coll == SP_COLL_ALL_REDUCE) {
    pt tree_ll = extend((pt){ 262144, 192 }, (pt){ 262144, 1024 });
    pt tree_ll128 = extend((pt){ 150994944, 128 }, (pt){ 251658240, 1024 });
    pt nvlstree = extend((pt){ 6442450944, 256 }, (pt){ 17179869184, 768 });
    const region t[] = {
      { R(TREE, LL), 4, { { 0, 16 }, { 262144, 16 }, { 262144, 1024 }, tree_ll } },
      { R(TREE, LL128), 7,
        { tree_ll, { 262144, 1024 }, { 262144, 16 }, { 14680064, 16 }, { 150994944, 128 },
          { 251658240, 1024 }, tree_ll128 } },
      { R(RING, LL128), 5,
        { { 150994944, 128 }, { 14680064, 16 }, { 33554432, 16 }, { 536870912, 32 }, { 536870912, 128 } } },
      { R(NVLS_TREE, SIMPLE), 8,
        { tree_ll128, { 251658240, 1024 }, { 150994944, 128 }, { 536870912, 128 }, { 536870912, 32 },
          { 6442450944, 256 }, { 17179869184, 768 }, nvlstree } },
      { R(RING, SIMPLE), 7,
        { nvlstree, { 17179869184, 768 }, { 6442450944, 256 }, { 536870912, 32 }, { 33554432, 16 },
          { 1073741824, 16 }, { MAX_BYTES, 16 } } },
    };
    memcpy(r, t, sizeof t);
    return G_N_ELEMENTS(t);
  }
  if (coll == SP_COLL_ALL_GATHER || coll == SP_COLL_REDUCE_SCATTER) {
    pt ring_ll = extend((pt){ 8388608, 256 }, (pt){ 33554432, 1024 });
    pt ring_ll128 = extend((pt){ 8589934592, 512 }, (pt){ 17179869184, 1024 });
    const region t[] = {
      { R(RING, LL), 7,
        { { 0, 16 }, { 131072, 16 }, { 262144, 32 }, { 8388608, 256 }, { 33554432, 1024 }, ring_ll,
          { 0, MAX_RANKS } } },
      { R(RING, LL128), 10,
        { ring_ll, { 33554432, 1024 }, { 8388608, 256 }, { 262144, 32 }, { 131072, 16 }, { 268435456, 16 },
          { 2147483648, 128 }, { 8589934592, 512 }, { 17179869184, 1024 }, ring_ll128 } },
      { R(RING, SIMPLE), 6,
        { ring_ll128, { 17179869184, 1024 }, { 8589934592, 512 }, { 268435456, 16 }, { 17179869184, 16 },
          { MAX_BYTES, 16 } } },
    };
    memcpy(r, t, sizeof t);
    return G_N_ELEMENTS(t);
  }
  return 0;
}

/* P5en, 1 GPU per node (nRanks == nNodes): all-reduce; all-gather and reduce-scatter
 * share one set. */
static int32_t p5en_one(sp_coll coll, region *r)
{
  pt ring_ll128 = extend((pt){ 50331648, 16 }, (pt){ 301989888, 128 });
  if (coll == SP_COLL_ALL_REDUCE) {
    pt tree_ll128 = extend((pt){ 524288, 8 }, (pt){ 1048576, 96 });
    pt tree_simple = extend((pt){ 8388608, 32 }, (pt){ 33554432, 128 });
    const region t[] = {
      { R(TREE, LL), 4, { { 0, 2 }, { 65536, 2 }, { 65536, 64 }, { 65536, MAX_RANKS } } },
      { R(TREE, LL128), 7,
        { { 65536, MAX_RANKS }, { 65536, 64 }, { 65536, 2 }, { 262144, 2 }, { 524288, 8 }, { 1048576, 96 },
          tree_ll128 } },
      { R(TREE, SIMPLE), 7,
        { tree_ll128, { 1048576, 96 }, { 524288, 8 }, { 262144, 2 }, { 8388608, 32 }, { 33554432, 128 },
          tree_simple } },
      { R(RING, LL128), 8,
        { tree_simple, { 33554432, 128 }, { 8388608, 32 }, { 262144, 2 }, { 6291456, 2 }, { 50331648, 16 },
          { 301989888, 128 }, ring_ll128 } },
      { R(RING, SIMPLE), 5,
        { ring_ll128, { 301989888, 128 }, { 50331648, 16 }, { 6291456, 2 }, { MAX_BYTES, 2 } } },
    };
    memcpy(r, t, sizeof t);
    return G_N_ELEMENTS(t);
  }
  if (coll == SP_COLL_ALL_GATHER || coll == SP_COLL_REDUCE_SCATTER) {
    pt pat = extend((pt){ 50331648, 64 }, (pt){ 117440512, 128 });
    const region t[] = {
      { R(PAT, SIMPLE), 10,
        { { 0, 2 }, { 65536, 2 }, { 1048576, 2 }, { 16777216, 32 }, { 50331648, 64 }, { 117440512, 128 }, pat,
          { MAX_BYTES, MAX_RANKS }, { 65536, MAX_RANKS }, { 0, MAX_RANKS } } },
      { R(RING, LL128), 9,
        { pat, { 117440512, 128 }, { 50331648, 64 }, { 16777216, 32 }, { 1048576, 2 }, { 4194304, 2 },
          { 50331648, 16 }, { 301989888, 128 }, ring_ll128 } },
      { R(RING, SIMPLE), 5,
        { ring_ll128, { 301989888, 128 }, { 50331648, 16 }, { 4194304, 2 }, { MAX_BYTES, 2 } } },
    };
    memcpy(r, t, sizeof t);
    return G_N_ELEMENTS(t);
  }
  return 0;
}

/* P6 (p6-b200), 8 GPUs per node (region_init_internal_p6, nRanks == 8 nNodes): all-reduce;
 * all-gather and reduce-scatter share one set (its "0x0" regions). */
static int32_t p6_8(sp_coll coll, region *r)
{
  if (coll == SP_COLL_ALL_REDUCE) {
    const region t[] = {
      { R(TREE, LL), 4, { { 0, 16 }, { 262144, 16 }, { 262144, 1024 }, { 262144, 1048576 } } },
      { R(TREE, LL128), 11,
        { { 262144, 1048576 }, { 262144, 1024 }, { 262144, 16 }, { 55574528, 16 }, { 67108864, 32 },
          { 465567744, 128 }, { 962592768, 256 }, { 1610612736, 512 }, { 2684354560, 1024 },
          { 107374182400, 50944 }, { 107374182400, 1048576 } } },
      { R(RING, LL128), 12,
        { { 55574528, 16 }, { 87031808, 16 }, { 562036736, 32 }, { 17179869184, 1024 },
          { 107374182400, 6408.141 }, { 107374182400, 33962.667 }, { 3758096384, 1024 },
          { 2147483648, 512 }, { 1610612736, 512 }, { 962592768, 256 }, { 465567744, 128 },
          { 67108864, 32 } } },
      { R(NVLS_TREE, SIMPLE), 6,
        { { 1610612736, 512 }, { 2147483648, 512 }, { 3758096384, 1024 }, { 107374182400, 33962.667 },
          { 107374182400, 50944 }, { 2684354560, 1024 } } },
      { R(NVLS_TREE, SIMPLE), 4, { { 87031808, 16 }, { 107374182400, 16 }, { 107374182400, 16 }, { 87031808, 16 } } },
      { R(RING, SIMPLE), 5,
        { { 562036736, 32 }, { 87031808, 16 }, { 107374182400, 16 }, { 107374182400, 6408.141 },
          { 17179869184, 1024 } } },
    };
    memcpy(r, t, sizeof t);
    return G_N_ELEMENTS(t);
  }
  if (coll == SP_COLL_ALL_GATHER || coll == SP_COLL_REDUCE_SCATTER) {
    const region t[] = {
      { R(RING, LL), 5,
        { { 0, 16 }, { 1048576, 16 }, { 106954752, 1024 }, { 107374182400, 1021978.297 }, { 0, 1048576 } } },
      { R(RING, LL128), 6,
        { { 1048576, 16 }, { 268435456, 16 }, { 21474836480, 1024 }, { 107374182400, 5107.038 },
          { 107374182400, 1021978.297 }, { 106954752, 1024 } } },
      { R(RING, SIMPLE), 3, { { 268435456, 16 }, { 107374182400, 16 }, { 107374182400, 5107.038 } } },
    };
    memcpy(r, t, sizeof t);
    return G_N_ELEMENTS(t);
  }
  return 0;
}

/* P6, 1 GPU per node (nRanks == nNodes). */
static int32_t p6_one(sp_coll coll, region *r)
{
  if (coll == SP_COLL_ALL_REDUCE) {
    const region t[] = {
      { R(TREE, LL), 5, { { 0, 2 }, { 32768, 2 }, { 32768, 128 }, { 32768, 131072 }, { 0, 131072 } } },
      { R(TREE, LL128), 6,
        { { 32768, 2 }, { 131072, 2 }, { 8388608, 128 }, { 8589934592, 131072 }, { 32768, 131072 },
          { 32768, 128 } } },
      { R(RING, LL128), 8,
        { { 131072, 2 }, { 3145728, 2 }, { 297795584, 128 }, { 107374182400, 45916 }, { 107374182400, 59831 },
          { 164626432, 128 }, { 20971520, 48 }, { 3145728, 48 } } },
      { R(TREE, SIMPLE), 6,
        { { 3145728, 48 }, { 20971520, 48 }, { 164626432, 128 }, { 107374182400, 59831 },
          { 107374182400, 131072 }, { 8589934592, 131072 } } },
      { R(RING, SIMPLE), 4, { { 3145728, 2 }, { 107374182400, 2 }, { 107374182400, 45916 }, { 297795584, 128 } } },
    };
    memcpy(r, t, sizeof t);
    return G_N_ELEMENTS(t);
  }
  if (coll == SP_COLL_ALL_GATHER) {
    const region t[] = {
      { R(RING, LL), 3, { { 0, 2 }, { 65536, 2 }, { 65536, 4 } } },
      { R(PAT, SIMPLE), 8,
        { { 0, 2 }, { 65536, 4 }, { 1048576, 4 }, { 12582912, 48 }, { 88080384, 48 }, { 248512512, 128 },
          { 34359738368, 17137 }, { 0, 131072 } } },
      { R(RING, LL128), 11,
        { { 65536, 2 }, { 2097152, 2 }, { 16777216, 8 }, { 291504128, 128 }, { 34359738368, 15008 },
          { 34359738368, 17137 }, { 248512512, 128 }, { 88080384, 48 }, { 12582912, 48 }, { 1048576, 4 },
          { 65536, 4 } } },
      { R(RING, SIMPLE), 5,
        { { 2097152, 2 }, { 34359738368, 2 }, { 34359738368, 15008 }, { 291504128, 128 }, { 16777216, 8 } } },
    };
    memcpy(r, t, sizeof t);
    return G_N_ELEMENTS(t);
  }
  if (coll == SP_COLL_REDUCE_SCATTER) {
    const region t[] = {
      { R(RING, LL), 3, { { 0, 2 }, { 65536, 2 }, { 65536, 4 } } },
      { R(PAT, SIMPLE), 7,
        { { 0, 2 }, { 65536, 4 }, { 1048576, 4 }, { 67108864, 48 }, { 106954752, 48 },
          { 274877906944, 121928 }, { 0, 131072 } } },
      { R(RING, LL128), 7,
        { { 65536, 2 }, { 2097152, 2 }, { 16777216, 8 }, { 106954752, 48 }, { 67108864, 48 }, { 1048576, 4 },
          { 65536, 4 } } },
      { R(RING, SIMPLE), 5,
        { { 2097152, 2 }, { 274877906944, 2 }, { 274877906944, 121928 }, { 106954752, 48 }, { 16777216, 8 } } },
    };
    memcpy(r, t, sizeof t);
    return G_N_ELEMENTS(t);
  }
  return 0;
}

#undef R

int32_t sp_tuner_pairs(sp_tuner t, sp_coll coll, uint64_t bytes, int32_t nranks, int32_t nnodes,
                       sp_algo *algo, sp_proto *proto, int32_t max)
{
  /* the plugin leaves groups on 2 nodes or fewer to NCCL: its regions are not defined there */
  if (t <= SP_TUNER_NONE || t >= SP_TUNER_COUNT || nnodes <= 2 || nranks < 1 || max < 1)
    return 0;
  region r[8];
  int32_t nr = 0;
  if (t == SP_TUNER_AWS_P6)
    nr = nranks == 8 * nnodes ? p6_8(coll, r) : nranks == nnodes ? p6_one(coll, r) : 0;
  else if (t == SP_TUNER_AWS_P5EN)
    nr = nranks == 8 * nnodes ? p5en_8(coll, r) : nranks == nnodes ? p5en_one(coll, r) : 0;
  else if (nranks == 8 * nnodes && coll == SP_COLL_ALL_REDUCE)
    nr = p5_ar8(r);
  else if (nranks == 2 * nnodes && coll == SP_COLL_ALL_REDUCE)
    nr = p5_ar2(r);
  else if (nranks == nnodes)
    nr = p5_one(coll, r);
  pt p = { (double)bytes, (double)nranks };
  int32_t k = 0;
  for (int32_t i = 0; i < nr && k < max; i++)
    if (in_region(p, &r[i])) {
      algo[k] = r[i].algo;
      proto[k] = r[i].proto;
      k++;
    }
  return k;
}
