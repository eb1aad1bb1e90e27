## examples: short programs using the library, built and run by make check
## (tests/test-whatif-cli.sh runs examples/whatif)
check_PROGRAMS += examples/whatif
examples_whatif_SOURCES = examples/whatif.c
examples_whatif_CFLAGS = $(AM_CFLAGS) -I$(top_srcdir)/src/sim $(SIMGRID_CFLAGS) \
	-DSPSIM_TOP_SRCDIR='"$(abs_top_srcdir)"'
examples_whatif_LDADD = libspsim-sim.la libspsim.la $(SIMGRID_LIBS) $(GLIB_LIBS) $(JSON_LIBS) $(LIBM)
