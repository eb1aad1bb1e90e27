#!/usr/bin/env bash
# Install the Debian packages spsim needs to build, test and run (only those missing).
# CUDA + NCCL are optional and not installed here (configure finds /usr/local/cuda).
set -euo pipefail
pkgs="build-essential autoconf automake libtool pkg-config libglib2.0-dev libjson-glib-dev
      libsimgrid-dev simgrid libopenmpi-dev openmpi-bin libopenblas-dev valgrind help2man"
missing=""
for p in $pkgs; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
if [ -n "$missing" ]; then
  echo "deps: installing$missing"
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends $missing
fi
