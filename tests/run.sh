#!/usr/bin/env bash
# Run hpcflow's whole test suite on a fresh Debian/Ubuntu machine, as root.
#
# Phases, each timed: install everything the tests need (scripts/install.sh --dev); start the
# local emulated Slurm cluster; the tests on the real cluster, two at a time; then those that
# need the cluster alone (marked cluster_alone), and beside them, one after the other, the tests
# that use no cluster: the multi-process torch.distributed tests (pytest-xdist, two workers)
# and the fast suite (no cluster, no multi-process test; the README's command), their output
# printed after; then, on a full green run, the benchmarks at their CI size
# (bench/run_all.sh --ci).
# Extra arguments go to one plain pytest run instead (and skip the benchmarks). Safe to rerun.
# Exit codes: pytest's (0 = every test passed), else non-zero when a benchmark crashed or a
# set-up step failed.
set -Eeuo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
readonly repo
phase_started="${SECONDS}"
declare -a phase_times=()

phase() {  # phase NAME: the previous phase ends, NAME starts
  printf 'tests/run.sh: %s\n' "$1" >&2
  phase_started="${SECONDS}"
}

phase_done() {  # phase_done NAME: record how long NAME took
  local took=$((SECONDS - phase_started))
  phase_times+=("$(printf '%-34s %4d min %02d s' "$1" "$((took / 60))" "$((took % 60))")")
}

print_times() {
  printf '\ntests/run.sh: time of each phase\n' >&2
  local line
  for line in "${phase_times[@]}"; do
    printf '  %s\n' "${line}" >&2
  done
  printf '  %-34s %4d min %02d s\n' "total" "$((SECONDS / 60))" "$((SECONDS % 60))" >&2
}

no_cluster_tests() {  # no_cluster_tests PYTEST...: the multi-process tests, then the fast suite
  local rc=0
  "$@" -n 2 --dist loadfile --durations=10 -m "dist and not slurm" || rc=$?
  "$@" -n 4 --dist loadfile --durations=15 -m "not slurm and not dist" || rc=$?
  return "${rc}"
}

main() {
  cd "${repo}"
  trap print_times EXIT
  local venv rc=0
  phase "installing (scripts/install.sh --dev)"
  venv="$(bash scripts/install.sh --dev)"
  phase_done "install"
  phase "starting the local Slurm cluster"
  "${venv}/bin/hpcflow" local-cluster up
  phase_done "local cluster"
  # Bytecode caching on, even where the environment turns it off (PYTHONDONTWRITEBYTECODE): each
  # pytest process and each program the tests start would otherwise compile (and pytest rewrite)
  # the same modules again.
  local -a pytest=(env -u PYTHONDONTWRITEBYTECODE OMP_NUM_THREADS=1 "${venv}/bin/python" -m pytest
    -p no:cacheprovider)
  if (($# > 0)); then
    phase "running pytest $*"
    "${pytest[@]}" --durations=25 "$@" || rc=$?
    phase_done "pytest $*"
    return "${rc}"
  fi
  # The cluster's tests two at a time (Slurm queues a job until its CPUs are free; each test has
  # its own run directory and HPCFLOW_HOME).
  phase "running the tests on the local cluster (2 workers)"
  "${pytest[@]}" -n 2 --dist worksteal --durations=25 -m "slurm and not cluster_alone" || rc=$?
  phase_done "tests on the local cluster"
  # Then, one at a time, those that need the cluster to themselves: they kill a daemon, drain a
  # node, stop the cluster or preempt every partition, and mostly wait on Slurm's own timers (a
  # node declared dead after SlurmdTimeout, a partition's GraceTime). Beside them, one after the
  # other, the tests that use no cluster: the multi-process torch.distributed tests (two
  # workers), then the fast suite (README, "Tests": four workers on two cores, since many of
  # its tests wait on a process they started). Their output is kept and printed after.
  phase "running the cluster tests that need it alone, and beside them those with no cluster"
  local side_log side_pid side_rc=0
  side_log="$(mktemp)"
  no_cluster_tests "${pytest[@]}" >"${side_log}" 2>&1 &
  side_pid=$!
  "${pytest[@]}" --durations=10 -m "slurm and cluster_alone" || rc=$?
  wait "${side_pid}" || side_rc=$?
  printf '\ntests/run.sh: the tests that use no cluster, run beside them:\n' >&2
  cat "${side_log}"
  rm -f "${side_log}"
  ((side_rc == 0)) || rc="${side_rc}"
  phase_done "alone + multi-process + fast"
  if ((rc == 0)); then
    # The benchmarks at their CI size: figures only, never a failure on time.
    phase "running the benchmarks (bench/run_all.sh --ci)"
    bash bench/run_all.sh --ci "${venv}/bin/python" || rc=$?
    phase_done "benchmarks"
  fi
  return "${rc}"
}

if [[ "${BASH_SOURCE[0]}" == "${0}" ]]; then
  main "$@"
fi
