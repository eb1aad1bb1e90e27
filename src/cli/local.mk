## src/cli: the spsim command
bin_PROGRAMS += spsim
spsim_SOURCES = src/cli/main.c src/cli/cli.h src/cli/cli_util.c
spsim_CFLAGS = $(AM_CFLAGS) -I$(top_srcdir)/src/sim $(SIMGRID_CFLAGS)
spsim_LDADD = libspsim-sim.la libspsim.la $(SIMGRID_LIBS) $(GLIB_LIBS) $(JSON_LIBS) $(LIBM)

# topo subcommand
spsim_SOURCES += src/cli/cmd_topo.c
# platform, bench, verify subcommands
spsim_SOURCES += src/cli/cmd_platform.c src/cli/cmd_platform_local.c src/cli/cmd_bench.c src/cli/cmd_verify.c
# calibrate: fit a platform to nccl-tests logs
spsim_SOURCES += src/cli/cmd_calibrate.c
# what-if analysis
spsim_SOURCES += src/cli/cmd_whatif.c
# the what-if spread over mpirun's ranks, through spsim-mpi-relay (src/nccl/mpi_relay.c)
spsim_SOURCES += src/cli/cli_spread.c
# ... and over forked processes of this machine (-j)
spsim_SOURCES += src/cli/cli_jobs.c
spsim_CFLAGS += -DSP_RELAY_DIR='"$(pkglibexecdir)"'
# whatif: where the built-in models are (source tree for uninstalled runs, then pkgdatadir)
spsim_CFLAGS += -DSP_SRC_MODELS_DIR='"$(abs_top_srcdir)/models"' -DSP_MODELS_DIR='"$(modelsdir)"'
