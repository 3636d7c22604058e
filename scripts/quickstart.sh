#!/usr/bin/env bash
# The quickstart: install hpcflow, bring up a 2-node local Slurm cluster, and run the example
# job through a preemption (USR1 -> checkpoint -> requeue -> resume) to completion.
#
# Usage: bash scripts/quickstart.sh [extra `hpcflow local-cluster rehearse` options]
# Run as root on Debian/Ubuntu (the local cluster runs slurmd as root). Safe to rerun.
# Exit code: 0 when the example job completed after its preemption.
set -Eeuo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
readonly repo

# Rehearse the example job and show its status. $1: the virtualenv; the rest: rehearse options.
# The status is asked for by job id: a bare `hpcflow status` shows the newest job in the user's
# index, which may be another job submitted meanwhile by the same user.
run_example() {
  local venv="$1" out job_id rc=0
  shift
  # A fresh run directory each time: an existing one would resume its finished run.
  out="$("${venv}/bin/hpcflow" local-cluster rehearse examples/tiny-dp.yaml \
    --set "run_dir=${repo}/runs/tiny-dp-$(date +%Y%m%d-%H%M%S)" --preemptions 1 "$@" --json)" \
    || rc=$?
  job_id="$(printf '%s' "${out}" | "${venv}/bin/python" -c \
    'import json, sys; print((json.load(sys.stdin).get("data") or {}).get("job_id") or "")' \
    2>/dev/null)" || job_id=""
  if [[ -z "${job_id}" ]]; then
    printf '%s\n' "${out}" >&2
    return "$((rc ? rc : 1))"
  fi
  "${venv}/bin/hpcflow" status "${job_id}" || rc=$((rc ? rc : $?))
  return "${rc}"
}

main() {
  cd "${repo}"
  local venv
  venv="$(bash scripts/install.sh)"
  "${venv}/bin/hpcflow" local-cluster up
  run_example "${venv}" "$@"
}

if [[ "${BASH_SOURCE[0]}" == "${0}" ]]; then
  main "$@"
fi
