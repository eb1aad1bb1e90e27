## src/core: libspsim (GLib + json-glib only; no engine code here)
lib_LTLIBRARIES += libspsim.la
libspsim_la_CFLAGS = $(AM_CFLAGS) -ffp-contract=off
libspsim_la_LIBADD = $(GLIB_LIBS) $(JSON_LIBS) $(LIBM)
libspsim_la_LDFLAGS = -version-info 0:0:0 $(AM_LDFLAGS)
libspsim_la_SOURCES =
spsiminclude_HEADERS += src/core/spsim/spsim.h src/core/spsim/error.h src/core/spsim/dtype.h \
	src/core/spsim/program.h src/core/spsim/transport.h src/core/spsim/coll.h src/core/spsim/exec.h

# runtime: errors, dtypes, programs, executor, loopback, traces
libspsim_la_SOURCES += src/core/error.c src/core/dtype.c src/core/halfbits.h src/core/program.c \
	src/core/exec.c src/core/loopback.c src/core/trace.c \
	src/core/json_out.c src/core/json_out.h

# units: byte sizes written by users ("64K", "1MiB", "8:8G")
libspsim_la_SOURCES += src/core/units.c
spsiminclude_HEADERS += src/core/spsim/units.h

# topology
libspsim_la_SOURCES += src/core/topology.c
spsiminclude_HEADERS += src/core/spsim/topology.h

# collectives: lowering and reference
libspsim_la_SOURCES += src/core/coll.c src/core/lower.c src/core/lower_emit.c src/core/lower_ring.c \
	src/core/lower_tree.c src/core/reference.c src/core/verify.c
noinst_HEADERS += src/core/coll_priv.h
spsiminclude_HEADERS += src/core/spsim/verify.h

# whatif: model configs, layouts and the training-step cost model
libspsim_la_SOURCES += src/core/model.c src/core/layout.c src/core/step.c src/core/kernel_model.c \
	src/core/stepgraph.c src/core/stepgraph_trace.c
spsiminclude_HEADERS += src/core/spsim/model.h src/core/spsim/layout.h src/core/spsim/step.h \
	src/core/spsim/kernel_model.h src/core/spsim/stepgraph.h

# graph + ops: communication graph IR, lowering, reference, kernels, operation library
libspsim_la_SOURCES += src/core/graph.c src/core/graph_lower.c src/core/kernels.c \
	src/core/ops_ulysses.c src/core/ops_tp.c src/core/ops_isp.c src/core/ops_pipe.c src/core/ops_ring.c \
	src/core/ops_verify.c
noinst_HEADERS += src/core/graph_private.h src/core/ops_private.h
spsiminclude_HEADERS += src/core/spsim/graph.h src/core/spsim/kernels.h src/core/spsim/ops.h
