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

main() {
  cd "${repo}"
  local venv
  venv="$(bash scripts/install.sh)"
  "${venv}/bin/hpcflow" local-cluster up
  # A fresh run directory each time: an existing one would resume its finished run.
  "${venv}/bin/hpcflow" local-cluster rehearse examples/tiny-dp.yaml \
    --set "run_dir=${repo}/runs/tiny-dp-$(date +%Y%m%d-%H%M%S)" --preemptions 1 "$@"
  "${venv}/bin/hpcflow" status
}

if [[ "${BASH_SOURCE[0]}" == "${0}" ]]; then
  main "$@"
fi
