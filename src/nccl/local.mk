## src/nccl: the real backend (MPI host transport, NCCL + CUDA transport, spsim-run)
