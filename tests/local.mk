## tests: one GTest program per module, TAP output

# runtime: dtypes, programs, executor, loopback, traces
check_PROGRAMS += tests/test-dtype tests/test-program tests/test-exec
tests_test_dtype_SOURCES = tests/test-dtype.c
tests_test_dtype_CFLAGS = $(AM_CFLAGS) -ffp-contract=off
tests_test_dtype_LDADD = libspsim.la $(GLIB_LIBS) $(JSON_LIBS) $(LIBM)
tests_test_program_SOURCES = tests/test-program.c
tests_test_program_LDADD = libspsim.la $(GLIB_LIBS) $(JSON_LIBS) $(LIBM)
tests_test_exec_SOURCES = tests/test-exec.c
tests_test_exec_LDADD = libspsim.la $(GLIB_LIBS) $(JSON_LIBS) $(LIBM)
TESTS += tests/test-dtype tests/test-program tests/test-exec

# NCCL's tuning model: its table, choices and protocol costs, by hand
check_PROGRAMS += tests/test-tuning
tests_test_tuning_SOURCES = tests/test-tuning.c
tests_test_tuning_LDADD = libspsim.la $(GLIB_LIBS) $(JSON_LIBS) $(LIBM)
TESTS += tests/test-tuning

# whatif: models, layouts, step model, CLI
check_PROGRAMS += tests/test-model tests/test-layout tests/test-step tests/test-kernel-model
tests_test_kernel_model_SOURCES = tests/test-kernel-model.c
tests_test_kernel_model_CPPFLAGS = $(AM_CPPFLAGS) -DSP_TOP_SRCDIR='"$(abs_top_srcdir)"'
tests_test_kernel_model_LDADD = libspsim.la $(GLIB_LIBS) $(JSON_LIBS) $(LIBM)
tests_test_model_SOURCES = tests/test-model.c
tests_test_model_LDADD = libspsim.la $(GLIB_LIBS) $(JSON_LIBS) $(LIBM)
tests_test_layout_SOURCES = tests/test-layout.c
tests_test_layout_LDADD = libspsim.la $(GLIB_LIBS) $(JSON_LIBS) $(LIBM)
tests_test_step_SOURCES = tests/test-step.c tests/step-fixture.h
tests_test_step_LDADD = libspsim.la $(GLIB_LIBS) $(JSON_LIBS) $(LIBM)
# mixture of experts: ep layouts, routing imbalance, expert memory and collectives
check_PROGRAMS += tests/test-moe-step
tests_test_moe_step_SOURCES = tests/test-moe-step.c tests/step-fixture.h
tests_test_moe_step_LDADD = libspsim.la $(GLIB_LIBS) $(JSON_LIBS) $(LIBM)
TESTS += tests/test-moe-step
TESTS += tests/test-model tests/test-layout tests/test-step tests/test-kernel-model tests/test-whatif-cli.sh tests/test-whatif-ux.sh tests/test-whatif-fp8.sh \
	tests/test-whatif-models.sh tests/test-layer-profile.sh
EXTRA_DIST += tests/test-whatif-cli.sh tests/test-whatif-ux.sh tests/test-whatif-fp8.sh \
	tests/test-whatif-models.sh tests/test-layer-profile.sh
# the what-if on a cluster of mixed GPUs
TESTS += tests/test-whatif-mixed.sh
EXTRA_DIST += tests/test-whatif-mixed.sh
# json-check: the shell tests' JSON parser (json-glib), e.g. for the what-if's --json
check_PROGRAMS += tests/json-check
tests_json_check_SOURCES = tests/json-check.c
tests_json_check_LDADD = $(GLIB_LIBS) $(JSON_LIBS)

# step graph: built and run without contention (core), and on SimGrid (engine)
check_PROGRAMS += tests/test-stepgraph tests/test-stepsim
tests_test_stepgraph_SOURCES = tests/test-stepgraph.c tests/step-fixture.h
tests_test_stepgraph_LDADD = libspsim.la $(GLIB_LIBS) $(JSON_LIBS) $(LIBM)
tests_test_stepsim_SOURCES = tests/test-stepsim.c tests/step-fixture.h
tests_test_stepsim_CFLAGS = $(AM_CFLAGS) -I$(top_srcdir)/src/sim $(SIMGRID_CFLAGS)
tests_test_stepsim_LDADD = libspsim-sim.la libspsim.la $(SIMGRID_LIBS) $(GLIB_LIBS) $(JSON_LIBS) $(LIBM)
TESTS += tests/test-stepgraph tests/test-stepsim

# the step graph's data-mode replay, over the loopback transport
check_PROGRAMS += tests/test-step-replay
tests_test_step_replay_SOURCES = tests/test-step-replay.c tests/step-fixture.h
tests_test_step_replay_LDADD = libspsim.la $(GLIB_LIBS) $(JSON_LIBS) $(LIBM)
TESTS += tests/test-step-replay

# graph + ops: graph IR and the operation library
check_PROGRAMS += tests/test-graph tests/test-ops-ulysses tests/test-ops-tp tests/test-ops-isp tests/test-ops-pipe \
	tests/test-ops-ring tests/test-ops-moe
tests_test_ops_moe_SOURCES = tests/test-ops-moe.c
tests_test_ops_moe_LDADD = libspsim.la $(GLIB_LIBS) $(JSON_LIBS) $(LIBM)
tests_test_ops_ring_SOURCES = tests/test-ops-ring.c
tests_test_ops_ring_LDADD = libspsim.la $(GLIB_LIBS) $(JSON_LIBS) $(LIBM)
tests_test_ops_pipe_SOURCES = tests/test-ops-pipe.c
tests_test_ops_pipe_LDADD = libspsim.la $(GLIB_LIBS) $(JSON_LIBS) $(LIBM)
tests_test_ops_tp_SOURCES = tests/test-ops-tp.c
tests_test_ops_tp_LDADD = libspsim.la $(GLIB_LIBS) $(JSON_LIBS) $(LIBM)
tests_test_ops_isp_SOURCES = tests/test-ops-isp.c
tests_test_ops_isp_LDADD = libspsim.la $(GLIB_LIBS) $(JSON_LIBS) $(LIBM)
tests_test_graph_SOURCES = tests/test-graph.c
tests_test_graph_LDADD = libspsim.la $(GLIB_LIBS) $(JSON_LIBS) $(LIBM)
tests_test_ops_ulysses_SOURCES = tests/test-ops-ulysses.c
tests_test_ops_ulysses_LDADD = libspsim.la $(GLIB_LIBS) $(JSON_LIBS) $(LIBM)
TESTS += tests/test-graph tests/test-ops-ulysses tests/test-ops-tp tests/test-ops-isp tests/test-ops-pipe \
	tests/test-ops-ring tests/test-ops-moe
# dropless MoE dispatch through spsim verify and spsim-run under mpirun
TESTS += tests/test-moe-dropless.sh
EXTRA_DIST += tests/test-moe-dropless.sh

# coll: collectives (lowering, reference, verification cases)
check_PROGRAMS += tests/test-coll
tests_test_coll_SOURCES = tests/test-coll.c
tests_test_coll_LDADD = libspsim.la $(GLIB_LIBS) $(JSON_LIBS) $(LIBM)
TESTS += tests/test-coll

check_PROGRAMS += tests/test-dbtree
tests_test_dbtree_SOURCES = tests/test-dbtree.c
tests_test_dbtree_LDADD = libspsim.la $(GLIB_LIBS) $(JSON_LIBS) $(LIBM)
TESTS += tests/test-dbtree

# units: byte sizes written by users
check_PROGRAMS += tests/test-units
tests_test_units_SOURCES = tests/test-units.c
tests_test_units_LDADD = libspsim.la $(GLIB_LIBS) $(JSON_LIBS) $(LIBM)
TESTS += tests/test-units

# topology: library tests and the topo CLI
check_PROGRAMS += tests/test-topology
tests_test_topology_SOURCES = tests/test-topology.c
tests_test_topology_LDADD = libspsim.la $(GLIB_LIBS) $(JSON_LIBS) $(LIBM)
TESTS += tests/test-topology tests/test-topo-cli.sh
EXTRA_DIST += tests/test-topo-cli.sh

# platforms: generator, shipped platforms, bench CLI
check_PROGRAMS += tests/test-platform
tests_test_platform_SOURCES = tests/test-platform.c
tests_test_platform_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/src/sim -DSP_TOP_SRCDIR='"$(abs_top_srcdir)"'
tests_test_platform_LDADD = libspsim-sim.la libspsim.la $(SIMGRID_LIBS) $(GLIB_LIBS) $(JSON_LIBS) $(LIBM)
check_PROGRAMS += tests/test-platform-routed
TESTS += tests/test-platform-routed
tests_test_platform_routed_SOURCES = tests/test-platform-routed.c tests/platform-file.h
tests_test_platform_routed_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/src/sim $(SIMGRID_CFLAGS)
tests_test_platform_routed_LDADD = libspsim-sim.la libspsim.la $(SIMGRID_LIBS) $(GLIB_LIBS) $(JSON_LIBS) $(LIBM)
TESTS += tests/test-platform tests/test-bench-cli.sh tests/test-platform-cli.sh tests/test-flow-pattern.sh tests/test-many-ranks.sh
TESTS += tests/test-platform-topo.sh tests/test-platform-local-props.sh
EXTRA_DIST += tests/test-platform-topo.sh tests/test-platform-local-props.sh
TESTS += tests/test-platform-zones.sh
EXTRA_DIST += tests/test-platform-zones.sh
EXTRA_DIST += tests/test-bench-cli.sh tests/test-platform-cli.sh tests/test-flow-pattern.sh tests/test-many-ranks.sh

# nccl-tests: its counts, names, table layout and log reader; spsim calibrate
check_PROGRAMS += tests/test-nccltests
tests_test_nccltests_SOURCES = tests/test-nccltests.c
tests_test_nccltests_LDADD = libspsim.la $(GLIB_LIBS) $(JSON_LIBS) $(LIBM)
TESTS += tests/test-nccltests tests/test-calibrate-cli.sh
EXTRA_DIST += tests/test-calibrate-cli.sh

# simengine: the SimGrid engine and `spsim verify`
check_PROGRAMS += tests/test-sim
tests_test_sim_SOURCES = tests/test-sim.c
tests_test_sim_CFLAGS = $(AM_CFLAGS) -I$(top_srcdir)/src/sim $(SIMGRID_CFLAGS)
tests_test_sim_LDADD = libspsim-sim.la libspsim.la $(SIMGRID_LIBS) $(GLIB_LIBS) $(JSON_LIBS) $(LIBM)
TESTS += tests/test-sim tests/test-verify-cli.sh
# the per-call exclusion of NCCL's hierarchical all-reduces (sp_coll_spec.no_hier), on 2 DGX H100 nodes
check_PROGRAMS += tests/test-sim-hier
tests_test_sim_hier_SOURCES = tests/test-sim-hier.c tests/platform-file.h
tests_test_sim_hier_CFLAGS = $(AM_CFLAGS) -I$(top_srcdir)/src/sim $(SIMGRID_CFLAGS)
tests_test_sim_hier_LDADD = libspsim-sim.la libspsim.la $(SIMGRID_LIBS) $(GLIB_LIBS) $(JSON_LIBS) $(LIBM)
TESTS += tests/test-sim-hier
# sibling groups priced by symmetry against every group simulated (sp_sim_coll_groups_time)
check_PROGRAMS += tests/test-sim-siblings
tests_test_sim_siblings_SOURCES = tests/test-sim-siblings.c tests/platform-file.h
tests_test_sim_siblings_CFLAGS = $(AM_CFLAGS) -I$(top_srcdir)/src/sim $(SIMGRID_CFLAGS)
tests_test_sim_siblings_LDADD = libspsim-sim.la libspsim.la $(SIMGRID_LIBS) $(GLIB_LIBS) $(JSON_LIBS) $(LIBM)
TESTS += tests/test-sim-siblings
# the what-if's pricer above its simulated grid: extrapolated with the size's own algorithm
check_PROGRAMS += tests/test-whatif-price
tests_test_whatif_price_SOURCES = tests/test-whatif-price.c tests/platform-file.h
tests_test_whatif_price_CFLAGS = $(AM_CFLAGS) -I$(top_srcdir)/src/sim $(SIMGRID_CFLAGS)
tests_test_whatif_price_LDADD = libspsim-sim.la libspsim.la $(SIMGRID_LIBS) $(GLIB_LIBS) $(JSON_LIBS) $(LIBM)
TESTS += tests/test-whatif-price
EXTRA_DIST += tests/test-verify-cli.sh

# real: spsim-run under mpirun (identity with the simulation, faults, CLI), CUDA kernels
check_PROGRAMS += tests/test-real-ref
tests_test_real_ref_SOURCES = tests/test-real-ref.c
tests_test_real_ref_LDADD = libspsim.la $(GLIB_LIBS) $(JSON_LIBS) $(LIBM)
TESTS += tests/test-real-identity.sh tests/test-real-faults.sh tests/test-real-algo.sh
EXTRA_DIST += tests/test-real-identity.sh tests/test-real-faults.sh tests/test-real-algo.sh tests/real-env.sh
check_PROGRAMS += tests/test-real-step-ref
tests_test_real_step_ref_SOURCES = tests/test-real-step-ref.c
tests_test_real_step_ref_CFLAGS = $(AM_CFLAGS) -I$(top_srcdir)/src/sim $(SIMGRID_CFLAGS)
tests_test_real_step_ref_LDADD = libspsim-sim.la libspsim.la $(SIMGRID_LIBS) $(GLIB_LIBS) $(JSON_LIBS) $(LIBM)
TESTS += tests/test-real-step.sh tests/test-real-step-compute.sh
# the CPU kernels of spsim-run --step planned for every layout of the sweep (no MPI)
check_PROGRAMS += tests/test-step-compute
tests_test_step_compute_SOURCES = tests/test-step-compute.c src/nccl/step_compute.c src/nccl/step_compute.h
tests_test_step_compute_CFLAGS = $(AM_CFLAGS) $(BLAS_CFLAGS) -I$(top_srcdir)/src/nccl
tests_test_step_compute_LDADD = libspsim.la $(BLAS_LIBS) $(GLIB_LIBS) $(JSON_LIBS) $(LIBM)
TESTS += tests/test-step-compute
EXTRA_DIST += tests/test-real-step.sh tests/test-real-step-compute.sh
# the what-if spread over mpirun's ranks: identical to one process
TESTS += tests/test-dist-sweep.sh
EXTRA_DIST += tests/test-dist-sweep.sh
TESTS += tests/test-jobs.sh
EXTRA_DIST += tests/test-jobs.sh
if HAVE_CUDA
check_PROGRAMS += tests/test-real-cuda
tests_test_real_cuda_SOURCES = tests/test-real-cuda.c
tests_test_real_cuda_CFLAGS = $(AM_CFLAGS) $(SP_CUDA_CPPFLAGS) -I$(top_srcdir)/src/nccl
tests_test_real_cuda_LDADD = src/nccl/kernels.$(OBJEXT) libspsim.la $(CUDA_LIBS) -lstdc++ \
	$(GLIB_LIBS) $(JSON_LIBS) $(LIBM)
TESTS += tests/test-real-cuda
# The fake device (tests/fakegpu): spsim-run and the kernel test linked against
# a host-memory stand-in for the CUDA runtime and NCCL, so the CUDA transports
# and the kernels' element code run bitwise against the simulation in CI.
FAKEGPU_SOURCES = tests/fakegpu/fakegpu.h tests/fakegpu/cuda.c tests/fakegpu/nccl.c
if HAVE_CUBLAS
FAKEGPU_SOURCES += tests/fakegpu/cublas.c
else
EXTRA_DIST += tests/fakegpu/cublas.c
endif
FAKEGPU_CFLAGS = $(AM_CFLAGS) -ffp-contract=off $(MPI_CFLAGS) $(BLAS_CFLAGS) $(SP_CUDA_CPPFLAGS) \
	-I$(top_srcdir)/src/nccl -I$(top_srcdir)/tests/fakegpu
check_PROGRAMS += tests/spsim-run-fakegpu tests/test-kernels-fakegpu
tests_spsim_run_fakegpu_SOURCES = $(spsim_run_SOURCES) $(FAKEGPU_SOURCES)
tests_spsim_run_fakegpu_CFLAGS = $(FAKEGPU_CFLAGS)
tests_spsim_run_fakegpu_LDADD = libspsim.la $(MPI_LIBS) $(BLAS_LIBS) $(GLIB_LIBS) $(JSON_LIBS) $(LIBM)
tests_test_kernels_fakegpu_SOURCES = tests/test-real-cuda.c $(FAKEGPU_SOURCES)
tests_test_kernels_fakegpu_CFLAGS = $(FAKEGPU_CFLAGS)
tests_test_kernels_fakegpu_LDADD = libspsim.la $(MPI_LIBS) $(BLAS_LIBS) $(GLIB_LIBS) $(JSON_LIBS) $(LIBM)
TESTS += tests/test-kernels-fakegpu tests/test-real-fakegpu.sh
EXTRA_DIST += tests/test-real-fakegpu.sh
else
EXTRA_DIST += tests/test-real-cuda.c tests/fakegpu/fakegpu.h tests/fakegpu/cuda.c \
	tests/fakegpu/nccl.c tests/fakegpu/cublas.c tests/test-real-fakegpu.sh
endif

# fuzz: the harnesses of tests/fuzz replayed over their seed corpus (bench/fuzz.sh
# runs them under libFuzzer); one replay program per harness
FUZZ_REPLAY_SOURCES = tests/fuzz/replay.c tests/fuzz/fuzz.h
FUZZ_SIM_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/src/sim
check_PROGRAMS += tests/fuzz/replay-model tests/fuzz/replay-layout tests/fuzz/replay-size \
	tests/fuzz/replay-topo tests/fuzz/replay-misc tests/fuzz/replay-platform \
	tests/fuzz/replay-nccltests tests/fuzz/replay-gemmtable tests/fuzz/replay-routing tests/fuzz/replay-step
tests_fuzz_replay_model_SOURCES = $(FUZZ_REPLAY_SOURCES) tests/fuzz/fuzz-model.c
tests_fuzz_replay_model_LDADD = libspsim.la $(GLIB_LIBS) $(JSON_LIBS) $(LIBM)
tests_fuzz_replay_layout_SOURCES = $(FUZZ_REPLAY_SOURCES) tests/fuzz/fuzz-layout.c
tests_fuzz_replay_layout_LDADD = libspsim.la $(GLIB_LIBS) $(JSON_LIBS) $(LIBM)
tests_fuzz_replay_size_SOURCES = $(FUZZ_REPLAY_SOURCES) tests/fuzz/fuzz-size.c
tests_fuzz_replay_size_LDADD = libspsim.la $(GLIB_LIBS) $(JSON_LIBS) $(LIBM)
tests_fuzz_replay_topo_SOURCES = $(FUZZ_REPLAY_SOURCES) tests/fuzz/fuzz-topo.c
tests_fuzz_replay_topo_LDADD = libspsim.la $(GLIB_LIBS) $(JSON_LIBS) $(LIBM)
tests_fuzz_replay_misc_SOURCES = $(FUZZ_REPLAY_SOURCES) tests/fuzz/fuzz-misc.c
tests_fuzz_replay_misc_CPPFLAGS = $(FUZZ_SIM_CPPFLAGS)
tests_fuzz_replay_misc_LDADD = libspsim-sim.la libspsim.la $(SIMGRID_LIBS) $(GLIB_LIBS) $(JSON_LIBS) $(LIBM)
tests_fuzz_replay_platform_SOURCES = $(FUZZ_REPLAY_SOURCES) tests/fuzz/fuzz-platform.c
tests_fuzz_replay_platform_CPPFLAGS = $(FUZZ_SIM_CPPFLAGS)
tests_fuzz_replay_platform_LDADD = libspsim-sim.la libspsim.la $(SIMGRID_LIBS) $(GLIB_LIBS) $(JSON_LIBS) $(LIBM)
tests_fuzz_replay_nccltests_SOURCES = $(FUZZ_REPLAY_SOURCES) tests/fuzz/fuzz-nccltests.c
tests_fuzz_replay_nccltests_LDADD = libspsim.la $(GLIB_LIBS) $(JSON_LIBS) $(LIBM)
tests_fuzz_replay_gemmtable_SOURCES = $(FUZZ_REPLAY_SOURCES) tests/fuzz/fuzz-gemmtable.c
tests_fuzz_replay_gemmtable_LDADD = libspsim.la $(GLIB_LIBS) $(JSON_LIBS) $(LIBM)
tests_fuzz_replay_routing_SOURCES = $(FUZZ_REPLAY_SOURCES) tests/fuzz/fuzz-routing.c
tests_fuzz_replay_routing_LDADD = libspsim.la $(GLIB_LIBS) $(JSON_LIBS) $(LIBM)
tests_fuzz_replay_step_SOURCES = $(FUZZ_REPLAY_SOURCES) tests/fuzz/fuzz-step.c
tests_fuzz_replay_step_LDADD = libspsim.la $(GLIB_LIBS) $(JSON_LIBS) $(LIBM)
TESTS += tests/test-fuzz-replay.sh
EXTRA_DIST += tests/test-fuzz-replay.sh tests/fuzz/corpus tests/fuzz/dict

# layers: no call cycle between the files and folders of libspsim, no subcommand
# calling into main.c, no engine header in src/core (docs/architecture.md)
TESTS += tests/test-layers.sh
EXTRA_DIST += tests/test-layers.sh

# man pages (help2man): installed by make install-man into a scratch DESTDIR
TESTS += tests/test-man.sh
EXTRA_DIST += tests/test-man.sh tests/tap-lib.sh
