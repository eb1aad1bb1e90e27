## src/core: libspsim (GLib + json-glib only; no engine code here)
lib_LTLIBRARIES += libspsim.la
libspsim_la_CFLAGS = $(AM_CFLAGS)
libspsim_la_LIBADD = $(GLIB_LIBS) $(JSON_LIBS) $(LIBM)
libspsim_la_LDFLAGS = -version-info 0:0:0 $(AM_LDFLAGS)
libspsim_la_SOURCES =
spsiminclude_HEADERS += src/core/spsim/spsim.h src/core/spsim/error.h src/core/spsim/dtype.h \
	src/core/spsim/program.h src/core/spsim/transport.h src/core/spsim/coll.h src/core/spsim/exec.h

# runtime: errors, dtypes, programs, executor, loopback, traces
libspsim_la_SOURCES += src/core/error.c src/core/dtype.c src/core/program.c \
	src/core/exec.c src/core/loopback.c src/core/trace.c

# topology
libspsim_la_SOURCES += src/core/topology.c
spsiminclude_HEADERS += src/core/spsim/topology.h

# collectives: lowering and reference
libspsim_la_SOURCES += src/core/coll.c src/core/lower.c src/core/reference.c
