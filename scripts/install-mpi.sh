#!/usr/bin/env bash
# Installs what a search across processes (`cargo cmc check --processes N`)
# needs, from the system's packages, unless it is there: Open MPI (its
# launcher, mpirun, and the headers and compiler wrapper the `mpi` crate
# builds against) and libclang (which the crate's bindings are generated
# with). Debian and Ubuntu; elsewhere, install Open MPI and libclang with
# the system's package manager.
set -euo pipefail

have_libclang() {
  compgen -G "/usr/lib/llvm-*/lib/libclang*.so*" >/dev/null \
    || compgen -G "/usr/lib/*/libclang*.so*" >/dev/null
}

if command -v mpirun >/dev/null && command -v mpicc >/dev/null && have_libclang; then
  exit 0
fi
if ! command -v apt-get >/dev/null; then
  echo "install-mpi.sh: no apt-get here: install Open MPI (mpirun, mpicc) and libclang with the system's package manager" >&2
  exit 1
fi
sudo=""
[ "$(id -u)" -ne 0 ] && sudo="sudo"
$sudo apt-get update -qq
$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
  openmpi-bin libopenmpi-dev libclang-dev >/dev/null
command -v mpirun >/dev/null && command -v mpicc >/dev/null
echo "install-mpi.sh: $(mpirun --version | head -n 1)"
