## src/nccl: the real backend (MPI host transport, NCCL + CUDA transport, spsim-run)
## MPI, CUDA and NCCL are used only here.
bin_PROGRAMS += spsim-run
spsim_run_SOURCES = src/nccl/run.c src/nccl/run_priv.h src/nccl/run_agree.c src/nccl/run_exec.c src/nccl/run_step.c src/nccl/step_compute.c src/nccl/step_compute.h src/nccl/step_exec.c src/nccl/step_exec.h src/nccl/run_compare.c src/nccl/run_probe.c src/nccl/real.h src/nccl/transport_mpi.c src/nccl/native_mpi.c
spsim_run_CFLAGS = $(AM_CFLAGS) -ffp-contract=off $(MPI_CFLAGS) $(BLAS_CFLAGS) \
	-DSP_SRC_MODELS_DIR='"$(abs_top_srcdir)/models"' -DSP_MODELS_DIR='"$(modelsdir)"'
spsim_run_LDADD = libspsim.la $(MPI_LIBS) $(BLAS_LIBS) $(GLIB_LIBS) $(JSON_LIBS) $(LIBM)
# spsim-mpi-relay: the MPI of `mpirun -np N spsim PLATFORM.xml` (spsim itself links
# SimGrid, whose library exports SMPI's MPI_* symbols, so it runs this as its child)
pkglibexec_PROGRAMS = spsim-mpi-relay
spsim_mpi_relay_SOURCES = src/nccl/mpi_relay.c
spsim_mpi_relay_CFLAGS = $(AM_CFLAGS) $(MPI_CFLAGS)
spsim_mpi_relay_LDADD = $(MPI_LIBS)
EXTRA_DIST += src/nccl/kernels.cu src/nccl/kernels.h src/nccl/kernel_ops.h src/nccl/transport_nccl.c src/nccl/step_compute_cuda.c

if HAVE_CUDA
# CUDA headers go in as system headers: nccl.h has old-style prototypes that
# -Wstrict-prototypes -Werror would reject.
SP_CUDA_CPPFLAGS = -isystem $(CUDA_HOME)/include
spsim_run_SOURCES += src/nccl/transport_nccl.c src/nccl/kernels.h
spsim_run_CFLAGS += $(SP_CUDA_CPPFLAGS)
spsim_run_LDADD += src/nccl/kernels.$(OBJEXT) $(CUDA_LIBS) -lstdc++
if HAVE_CUBLAS
spsim_run_SOURCES += src/nccl/step_compute_cuda.c
spsim_run_LDADD += $(CUBLAS_LIBS)
endif

# The kernels are built by nvcc with an explicit rule (automake knows no CUDA):
# -fmad=false keeps data kernels free of FMA contraction; host warnings go
# through -Xcompiler; sanitizer flags never reach nvcc. Override the GPU
# targets with `make NVCC_ARCH_FLAGS=...`.
NVCC_ARCH_FLAGS = --generate-code arch=compute_80,code=[sm_80,compute_80] \
	--generate-code arch=compute_90,code=sm_90
SP_NVCC_WERROR = $(if $(findstring -Werror,$(SP_WARN_CFLAGS)),-Werror all-warnings -Xcompiler -Werror)
SP_NVCCFLAGS = -std=c++17 -O3 -fmad=false $(NVCC_ARCH_FLAGS) -Xcompiler -fPIC,-Wall,-Wextra \
	$(SP_NVCC_WERROR) -I$(top_builddir) -I$(top_srcdir)/src/nccl -I$(top_srcdir)/src/core
src/nccl/kernels.$(OBJEXT): $(top_srcdir)/src/nccl/kernels.cu $(top_srcdir)/src/nccl/kernels.h $(top_srcdir)/src/nccl/kernel_ops.h $(top_srcdir)/src/core/halfbits.h
	@$(MKDIR_P) src/nccl
	$(AM_V_GEN)$(NVCC) $(SP_NVCCFLAGS) -c -o $@ $(top_srcdir)/src/nccl/kernels.cu
CLEANFILES += src/nccl/kernels.$(OBJEXT)
endif
