#!/usr/bin/env bash
# Run every benchmark once at its small size and print their figures.
#
# Usage: bash bench/run_all.sh [--ci] [PYTHON]   (default: .venv/bin/python of the repository)
#   --ci   the subset tests/run.sh runs after the tests, to keep CI within its time: every
#          benchmark but the four longest, which run jobs on the cluster for minutes: the two
#          goodput runs (a preemption every 20 s, failures every 10 s), bench_submitit and
#          bench_interval (seeded failures); the paths they drive (warned requeue, in-job
#          restart, hpcflow.launch, checkpoint.interval: auto) have cluster tests
# Needs the local Slurm cluster for the submit, goodput and submitit benchmarks (hpcflow local-cluster up).
# Benchmarks report figures and ratios; they never fail on time. Exit status: non-zero only when
# a benchmark itself crashed (that is a bug, not a slow machine).
set -Eeuo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
ci=0
if [[ "${1:-}" == "--ci" ]]; then
  ci=1
  shift
fi
python="${1:-${repo}/.venv/bin/python}"
readonly repo python ci

main() {
  cd "${repo}"
  local failed=0 bench
  local -a benches=(
    "bench/bench_submit.py --repeat 3"
    "bench/bench_pcluster.py --repeat 3"
    "bench/bench_checkpoint.py --small"
    "bench/bench_mirror.py --small"
    "bench/bench_plan.py"
    "bench/bench_report.py --events 20000"
  )
  if ((ci == 0)); then
    benches+=("bench/bench_submitit.py --steps 40" "bench/bench_goodput.py --small"
      "bench/bench_goodput.py --kill-every-s 10 --small" "bench/bench_interval.py --small")
  fi
  for bench in "${benches[@]}"; do
    printf '\n=== %s\n' "${bench}"
    local started="${SECONDS}"
    # shellcheck disable=SC2086  # the entries are fixed word lists above
    if ! OMP_NUM_THREADS=1 "${python}" ${bench}; then
      printf 'bench: %s crashed\n' "${bench}" >&2
      failed=1
    fi
    printf '=== %s took %d s\n' "${bench}" "$((SECONDS - started))"
  done
  return "${failed}"
}

if [[ "${BASH_SOURCE[0]}" == "${0}" ]]; then
  main "$@"
fi
