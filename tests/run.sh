#!/usr/bin/env bash
# Run hpcflow's whole test suite on a fresh Debian/Ubuntu machine, as root.
#
# Phases, each timed: install everything the tests need (scripts/install.sh --dev); start the
# local emulated Slurm cluster; the fast suite (no cluster, no multi-process test; the README's
# command); the tests on the real cluster, two at a time; then those that need the cluster alone
# (marked cluster_alone), with the multi-process torch.distributed tests, which need no
# cluster, beside them (pytest-xdist, two workers; their output follows); then, on a full green
# run, the benchmarks at their CI size (bench/run_all.sh --ci).
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
  # The fast suite (README, "Tests"): four workers on two cores, since many of these tests wait
  # on a process they started.
  phase "running the fast suite (no cluster, no multi-process test; 4 workers)"
  "${pytest[@]}" -n 4 --dist loadfile --durations=15 -m "not slurm and not dist" || rc=$?
  phase_done "fast suite"
  # The cluster's tests two at a time (Slurm queues a job until its CPUs are free; each test has
  # its own run directory and HPCFLOW_HOME), then, one at a time, those that need the cluster to
  # themselves: they kill a daemon, drain a node, stop the cluster or preempt every partition.
  phase "running the tests on the local cluster (2 workers)"
  "${pytest[@]}" -n 2 --dist worksteal --durations=25 -m "slurm and not cluster_alone" || rc=$?
  phase_done "tests on the local cluster"
  # Those that need the cluster alone mostly wait on Slurm's own timers (a node declared dead
  # after SlurmdTimeout, a partition's GraceTime): the multi-process tests, which use no
  # cluster, run beside them, two at a time, their output kept and printed after.
  phase "running the cluster tests that need it alone, and beside them the multi-process tests"
  local dist_log dist_pid dist_rc=0
  dist_log="$(mktemp)"
  "${pytest[@]}" -n 2 --dist loadfile --durations=10 -m "dist and not slurm" \
    >"${dist_log}" 2>&1 &
  dist_pid=$!
  "${pytest[@]}" --durations=10 -m "slurm and cluster_alone" || rc=$?
  wait "${dist_pid}" || dist_rc=$?
  printf '\ntests/run.sh: the multi-process tests (2 workers), run beside them:\n' >&2
  cat "${dist_log}"
  rm -f "${dist_log}"
  ((dist_rc == 0)) || rc="${dist_rc}"
  phase_done "cluster tests alone + multi-process"
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
