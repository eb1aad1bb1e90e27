## src/core: libspsim (GLib + json-glib only; no engine code here)
## One folder per layer of the data path (docs/architecture.md): base, topology,
## graph, ops, lower, exec, verify, and step for the training step. Public headers
## are in src/core/spsim/; private headers shared by several folders are in
## src/core/internal/ (on the library's include path only, never installed);
## halfbits.h stays in src/core/ because the CUDA kernels (src/nccl) include it too.
lib_LTLIBRARIES += libspsim.la
libspsim_la_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/src/core/internal
libspsim_la_CFLAGS = $(AM_CFLAGS) -ffp-contract=off
libspsim_la_LIBADD = $(GLIB_LIBS) $(JSON_LIBS) $(LIBM)
libspsim_la_LDFLAGS = -version-info 0:0:0 $(AM_LDFLAGS)
libspsim_la_SOURCES =
spsiminclude_HEADERS += src/core/spsim/spsim.h
noinst_HEADERS += src/core/internal/coll_priv.h src/core/internal/graph_private.h \
	src/core/internal/ops_private.h src/core/internal/json_out.h src/core/internal/svg_out.h src/core/internal/csv_out.h

# base: errors, element types and their host arithmetic, byte sizes written by
# users ("64K", "1MiB", "8:8G"), JSON documents, SVG pictures
libspsim_la_SOURCES += src/core/base/error.c src/core/base/dtype.c src/core/halfbits.h \
	src/core/base/units.c src/core/base/json_out.c src/core/base/svg_out.c src/core/base/csv_out.c \
	src/core/base/programs.c
spsiminclude_HEADERS += src/core/spsim/error.h src/core/spsim/dtype.h src/core/spsim/units.h \
	src/core/spsim/programs.h

# base: nccl-tests' sizes, names, table layout and the reader of its logs
libspsim_la_SOURCES += src/core/base/nccltests.c
spsiminclude_HEADERS += src/core/spsim/nccltests.h

# topology: process topologies (and the pipeline grid and initialiser over them),
# parallel layouts, model configurations
libspsim_la_SOURCES += src/core/topology/topology.c src/core/topology/topo_private.h \
	src/core/topology/topology_grid.c src/core/topology/topology_expert.c src/core/topology/layout.c \
	src/core/topology/model.c
spsiminclude_HEADERS += src/core/spsim/topology.h src/core/spsim/layout.h src/core/spsim/model.h

# graph: the communication graph IR (its records and shared checks; collective, local
# and kernel nodes; data mode and the reference interpreter), collective specs and
# their reference semantics, the data kernels
libspsim_la_SOURCES += src/core/graph/graph.c src/core/graph/graph_build.h \
	src/core/graph/graph_coll.c src/core/graph/graph_local.c src/core/graph/graph_kernel.c \
	src/core/graph/graph_data.c src/core/graph/coll.c src/core/graph/reference.c src/core/graph/dbtree.c \
	src/core/graph/kernels.c src/core/graph/graph_moe.c src/core/graph/kernels_moe.c
spsiminclude_HEADERS += src/core/spsim/graph.h src/core/spsim/coll.h src/core/spsim/kernels.h \
	src/core/spsim/dbtree.h

# ops: the operation library (graph builders, one file per family)
libspsim_la_SOURCES += src/core/ops/ops_common.c src/core/ops/ops_ulysses.c src/core/ops/ops_tp.c \
	src/core/ops/ops_isp.c src/core/ops/ops_pipe.c src/core/ops/ops_ring.c \
	src/core/ops/ops_moe.c src/core/ops/ops_moe_ref.c src/core/ops/ops_moe_dropless.c src/core/ops/ops_a2av.c
spsiminclude_HEADERS += src/core/spsim/ops.h

# lower: graph and collectives to per-rank programs (dispatcher, one file per algorithm);
# NCCL's tuning model (algorithm and protocol per call, what a protocol costs) and the
# tuner plugins that override it on some clusters
libspsim_la_SOURCES += src/core/lower/graph_lower.c src/core/lower/lower.c \
	src/core/lower/lower_emit.c src/core/lower/lower_direct.c src/core/lower/lower_ring.c \
	src/core/lower/lower_tree.c src/core/lower/lower_pat.c src/core/lower/lower_dbtree.c src/core/lower/lower_hier.c \
	src/core/lower/tuning.c src/core/lower/tuner_plugin.c
spsiminclude_HEADERS += src/core/spsim/tuning.h src/core/spsim/tuner_plugin.h

# exec: per-rank programs, the executor, the loopback transport, timelines
libspsim_la_SOURCES += src/core/exec/program.c src/core/exec/exec.c src/core/exec/loopback.c \
	src/core/exec/trace.c
spsiminclude_HEADERS += src/core/spsim/program.h src/core/spsim/transport.h src/core/spsim/exec.h

# verify: collectives and operations lowered, run and compared with their reference
# (collective cases; operation cases by name; whole-world cases; a layout's checks)
libspsim_la_SOURCES += src/core/verify/verify.c src/core/verify/ops_verify.c \
	src/core/verify/graph_case.h src/core/verify/graph_case.c src/core/verify/layout_check.c
spsiminclude_HEADERS += src/core/spsim/verify.h

# step: the training-step cost model, kernel times, the step graph and its data-mode replay
libspsim_la_SOURCES += src/core/step/step.c src/core/step/step_act.c src/core/step/kernel_model.c \
	src/core/step/stepgraph.c src/core/step/stepgraph_build.c src/core/step/stepgraph_tpo.c src/core/step/stepgraph_moe.c \
	src/core/step/stepgraph_private.h \
	src/core/step/stepgraph_run.c src/core/step/stepgraph_trace.c src/core/step/step_replay.c \
	src/core/step/step_moe.c
spsiminclude_HEADERS += src/core/spsim/step.h src/core/spsim/kernel_model.h \
	src/core/spsim/stepgraph.h src/core/spsim/step_replay.h
# TP communication overlapped with the GEMMs (tpoverlap=1)
libspsim_la_SOURCES += src/core/step/step_tpoverlap.c

# whatif: the what-if analysis (options, evaluation and ranking, the report's text, JSON
# and SVG, the --verify composition); engines plug in through sp_whatif_engine
libspsim_la_SOURCES += src/core/whatif/whatif.c src/core/whatif/whatif_private.h \
	src/core/whatif/whatif_text.c src/core/whatif/whatif_family.c src/core/whatif/whatif_json.c src/core/whatif/whatif_csv.c src/core/whatif/whatif_export.c src/core/whatif/whatif_sensitivity.c src/core/whatif/whatif_svg.c \
	src/core/whatif/whatif_verify.c src/core/whatif/whatif_spread.c
spsiminclude_HEADERS += src/core/spsim/whatif.h
