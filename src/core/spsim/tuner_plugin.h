/**
 * @file tuner_plugin.h
 * @brief NCCL tuner plugins: the (algorithm, protocol) a cluster's own plugin imposes
 *        where NCCL's model would choose otherwise.
 *
 * NCCL lets a plugin (NCCL_TUNER_PLUGIN) rewrite its cost table per call; where the
 * plugin marks a pair, NCCL runs it. Clusters ship such plugins, and nccl-tests
 * measured there reflect the plugin's choice, not NCCL's model. spsim knows:
 *
 * - #SP_TUNER_AWS_P5: aws-ofi-nccl's region tuner for p5.48xlarge and p5e (8 x H100 or
 *   H200, 32 x 100 Gb/s EFA), aws/aws-ofi-nccl v1.16.3, src/tuner/nccl_ofi_regions.cpp
 *   (region_init_internal_p5_p5e, region_get_coll_info_internal_v3). It divides the
 *   (message bytes, ranks) plane into polygons, each naming one pair, measured by AWS on
 *   p5: for all-reduce with 8, 2 or 1 GPUs per node, and all-gather and reduce-scatter
 *   with 1. A point inside a polygon or on its edge takes the first such polygon's pair,
 *   in the plugin's order, if NCCL offers that pair (NVLS-tree needs NVLink SHARP); the
 *   plugin leaves groups on 2 nodes or fewer, and points outside every polygon, to
 *   NCCL's model.
 * - #SP_TUNER_AWS_P5EN: the same plugin's regions for p5en.48xlarge (8 x H200, 16 x 200
 *   Gb/s EFA; region_init_internal_p5en): all-reduce, all-gather and reduce-scatter with 8
 *   GPUs per node or 1.
 * - #SP_TUNER_AWS_P6: its regions for p6-b200.48xlarge (8 x B200, 8 x 400 Gb/s EFA;
 *   region_init_internal_p6), the same collectives. The plugin also sets the channels of
 *   tree LL128 all-reduces of 4 to 32 MiB on p6 (calculateBestNChannel); spsim keeps its
 *   own there.
 *
 * A platform names its plugin with the top-zone property `nccl_tuner` (`spsim platform
 * dgx --nccl-tuner aws-p5`); sp_tune_choose applies it when neither the algorithm nor
 * the protocol is forced.
 */
#ifndef SPSIM_TUNER_PLUGIN_H
#define SPSIM_TUNER_PLUGIN_H

#include <glib.h>
#include <stdint.h>
#include "spsim/coll.h"

G_BEGIN_DECLS

/** A tuner plugin. */
typedef enum {
  SP_TUNER_NONE = 0, /**< NCCL's own model only */
  SP_TUNER_AWS_P5,   /**< aws-ofi-nccl v1.16.3's region tuner, platform P5/P5e */
  SP_TUNER_AWS_P5EN, /**< the same, platform P5en */
  SP_TUNER_AWS_P6,   /**< the same, platform P6 (p6-b200) */
  SP_TUNER_COUNT
} sp_tuner;

/** @return "none", "aws-p5", "aws-p5en", "aws-p6". */
const char *sp_tuner_name(sp_tuner t);

/** @return the names spsim knows, for messages: "aws-p5, aws-p5en, aws-p6 or none". */
const char *sp_tuner_list(void);

/** Parse a plugin name (as sp_tuner_name, case-insensitive); FALSE when unknown. */
gboolean sp_tuner_parse(const char *s, sp_tuner *out);

/**
 * The pairs plugin @p t names for @p coll of @p bytes (NCCL's nBytes) on a group of
 * @p nranks ranks on @p nnodes nodes, in the plugin's order: the caller runs the first
 * one NCCL offers. Writes at most @p max pairs to @p algo / @p proto.
 * @return how many (0: the plugin leaves the call to NCCL's model).
 */
int32_t sp_tuner_pairs(sp_tuner t, sp_coll coll, uint64_t bytes, int32_t nranks, int32_t nnodes,
                       sp_algo *algo, sp_proto *proto, int32_t max);

G_END_DECLS

#endif
