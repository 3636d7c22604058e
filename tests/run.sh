#!/usr/bin/env bash
# Run hpcflow's whole test suite on a fresh Debian/Ubuntu machine, as root.
#
# Installs everything the tests need (scripts/install.sh --dev), starts the local emulated
# Slurm cluster, then runs pytest. Extra arguments go to pytest. Safe to rerun.
# Exit codes: pytest's (0 = every test passed); 1 when a set-up step fails.
set -Eeuo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
readonly repo

main() {
  cd "${repo}"
  local venv
  venv="$(bash scripts/install.sh --dev)"
  printf 'tests/run.sh: starting the local Slurm cluster\n' >&2
  "${venv}/bin/hpcflow" local-cluster up
  printf 'tests/run.sh: running pytest\n' >&2
  OMP_NUM_THREADS=1 "${venv}/bin/python" -m pytest -p no:cacheprovider "$@"
}

if [[ "${BASH_SOURCE[0]}" == "${0}" ]]; then
  main "$@"
fi
