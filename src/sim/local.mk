## src/sim: the SimGrid engine (the only place that includes SimGrid)
noinst_LTLIBRARIES += libspsim-sim.la
libspsim_sim_la_CFLAGS = $(AM_CFLAGS) $(SIMGRID_CFLAGS)
libspsim_sim_la_LIBADD = libspsim.la $(SIMGRID_LIBS)
libspsim_sim_la_SOURCES = src/sim/sim.c src/sim/sim.h
