## src/sim: the SimGrid engine (the only place that includes SimGrid)
noinst_LTLIBRARIES += libspsim-sim.la
libspsim_sim_la_CFLAGS = $(AM_CFLAGS) $(SIMGRID_CFLAGS)
libspsim_sim_la_CXXFLAGS = $(AM_CXXFLAGS) $(SIMGRID_CFLAGS)
libspsim_sim_la_LIBADD = libspsim.la $(SIMGRID_LIBS)
libspsim_sim_la_SOURCES = src/sim/sim.c src/sim/sim.h src/sim/sim_load.c src/sim/sim_coll.c src/sim/sim_priv.h src/sim/flow.c src/sim/flow.h \
	src/sim/platform.c src/sim/platform.h

# whatif: engine-side glue of the what-if analysis
libspsim_sim_la_SOURCES += src/sim/whatif_sim.c src/sim/whatif_sim.h

# step: the training step's task graph run on the platform
libspsim_sim_la_SOURCES += src/sim/stepsim.c src/sim/stepsim.h

# platforms: generator of the calibrated DGX platform family (text only, no SimGrid calls)
libspsim_sim_la_SOURCES += src/sim/platform_gen.c src/sim/platform_gen.h \
	src/sim/platform_args.c src/sim/platform_args.h

# routed: a generated platform built into SimGrid as one zone routed by arithmetic (C++)
libspsim_sim_la_SOURCES += src/sim/platform_routed.cpp src/sim/platform_routed.h

# calibrate: placing nccl-tests' ranks by node, fitting a generated platform to nccl-tests logs
libspsim_sim_la_SOURCES += src/sim/calibrate.c src/sim/calibrate.h
