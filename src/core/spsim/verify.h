/**
 * @file verify.h
 * @brief Verification cases: one collective on a world of ranks, lowered for
 *        every rank, with deterministic input buffers and expected outputs.
 *        Engine-agnostic; used by `spsim verify` (SimGrid), by `spsim-run
 *        --checksum` (MPI / NCCL) and by the tests (loopback).
 *
 * Conventions (every engine reproduces them, so checksums agree):
 * - every member's program has buffer 0 = "in" (sp_coll_in_count elements) and
 *   buffer 1 = "out" (sp_coll_out_count elements), then the lowering's scratch;
 *   ranks outside the group get an empty program (no buffers, no steps);
 * - in data mode, rank r's input is sp_fill_pattern(seed = r * 1000003 + 17,
 *   first index 0) with r the GLOBAL rank; out and scratch buffers start zeroed
 *   (so members whose out a collective leaves untouched expect zeros);
 * - sp_case_checksum(rank) = sp_checksum(0, out, out bytes) of a member;
 *   sp_case_checksum_all = sp_checksum_combine() of the members' checksums in
 *   increasing global rank order.
 */
#ifndef SPSIM_VERIFY_H
#define SPSIM_VERIFY_H

#include <glib.h>
#include <stdint.h>
#include <stdio.h>
#include "spsim/coll.h"
#include "spsim/program.h"

G_BEGIN_DECLS

/** Input pattern seed of global rank @p rank. */
#define SP_CASE_SEED(rank) ((uint64_t)(rank) * 1000003u + 17u)

/** One collective on a world: programs, buffers, expected outputs. */
typedef struct sp_case sp_case;

/**
 * Lower @p spec for every rank of [0, @p world). Group ranks must lie inside the
 * world. @p with_data: allocate buffers, fill inputs and compute the expected
 * outputs with the reference semantics (sp_coll_reference's orders).
 */
sp_case *sp_case_new_coll(const sp_coll_spec *spec, int32_t world, gboolean with_data,
                          GError **err);
/**
 * Like sp_case_new_coll but only for @p rank (what one process of a real
 * backend needs): only its program, buffers and expected output are built;
 * other ranks' programs are NULL. The expected output is computed from the
 * inputs' pattern without materialising other ranks' buffers at once.
 */
sp_case *sp_case_new_coll_rank(const sp_coll_spec *spec, int32_t world, int32_t rank,
                               gboolean with_data, GError **err);
/** @return the number of ranks of the world. */
int32_t sp_case_world(const sp_case *c);
/** @return the spec (its ranks are owned by the case). */
const sp_coll_spec *sp_case_spec(const sp_case *c);
/** @return rank's program (NULL when not built: single-rank cases). */
sp_program *sp_case_program(const sp_case *c, int32_t rank);
/** @return the programs of ranks 0..world-1 (entries NULL when not built). */
sp_program *const *sp_case_programs(const sp_case *c);
/** @return rank's buffer table (indexed like its program's buffers); NULL in cost mode. */
void *const *sp_case_bufs(const sp_case *c, int32_t rank);
/** @return every rank's buffer table, for sp_loopback_run; NULL in cost mode. */
void **const *sp_case_all_bufs(const sp_case *c);
/**
 * @return the expected content of rank's out buffer (sp_case_out_bytes bytes),
 * or NULL for non-members, ranks not built and cost mode.
 */
const void *sp_case_expected(const sp_case *c, int32_t rank);
/** @return the size in bytes of a member's out buffer. */
uint64_t sp_case_out_bytes(const sp_case *c);
/** @return the group index of @p rank, or -1. */
int32_t sp_case_member(const sp_case *c, int32_t rank);

/**
 * Compare every built member's out buffer with the expected result. On mismatch
 * set *bad_rank and *bad_offset (first differing byte, in rank order; either may
 * be NULL) and return FALSE with SP_ERROR_MISMATCH.
 */
gboolean sp_case_check(const sp_case *c, int32_t *bad_rank, uint64_t *bad_offset, GError **err);
/** FNV-1a checksum of rank's out buffer (members only; non-members and cost mode: 0). */
uint64_t sp_case_checksum(const sp_case *c, int32_t rank);
/** FNV-1a checksum of the expected out of @p rank (0 when not available). */
uint64_t sp_case_expected_checksum(const sp_case *c, int32_t rank);
/** sp_checksum_combine of the members' sp_case_checksum in rank order (built ranks only). */
uint64_t sp_case_checksum_all(const sp_case *c);
/**
 * Print "checksum rank=<r> 0x<16 hex>" per built member in rank order, then
 * "checksum all=0x<16 hex>". Both engines print exactly this.
 */
void sp_case_print_checksums(const sp_case *c, FILE *out);
void sp_case_free(sp_case *c);

/**
 * Combine per-rank checksums (in increasing rank order) into the "all" value:
 * FNV-1a over each value as 8 little-endian bytes. A backend that gathers the
 * members' checksums to one process can print the same lines without the others'
 * buffers.
 */
uint64_t sp_checksum_combine(const uint64_t *sums, size_t count);
/** Print the canonical checksum lines for @p count members (@p ranks increasing). */
void sp_checksum_print_lines(FILE *out, const int32_t *ranks, const uint64_t *sums, size_t count);

/** @return a new array {first, first + stride, ..., first + (n-1) * stride} (g_free it). */
int32_t *sp_group_range(int32_t first, int32_t stride, int32_t n);

G_END_DECLS

#endif
