#!/usr/bin/env bash
# Run hpcflow's whole test suite on a fresh Debian/Ubuntu machine, as root.
#
# Installs everything the tests need (scripts/install.sh --dev), starts the local emulated
# Slurm cluster, runs pytest, then (on a full, green run) the benchmarks at their small size.
# Extra arguments go to pytest (and skip the benchmarks). Safe to rerun.
# Exit codes: pytest's (0 = every test passed), else non-zero when a benchmark crashed or a
# set-up step failed.
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
  local rc=0
  OMP_NUM_THREADS=1 "${venv}/bin/python" -m pytest -p no:cacheprovider --durations=25 "$@" || rc=$?
  if ((rc == 0 && $# == 0)); then
    # The benchmarks at their small size: figures only, never a failure on time.
    printf 'tests/run.sh: running the benchmarks (bench/run_all.sh)\n' >&2
    bash bench/run_all.sh "${venv}/bin/python" || rc=$?
  fi
  return "${rc}"
}

if [[ "${BASH_SOURCE[0]}" == "${0}" ]]; then
  main "$@"
fi
