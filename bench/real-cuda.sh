#!/bin/sh
# CUDA kernel throughput (reduce, copy, pack) as a fraction of the GPU's
# measured device-to-device copy bandwidth (needs a GPU; see docs/gpu-validation.md).
#   bench/real-cuda.sh [BUILDDIR]
set -eu
build=${1:-.}
exec "$build/tests/test-real-cuda" --bench
