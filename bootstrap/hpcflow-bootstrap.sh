#!/usr/bin/env bash
# hpcflow node bootstrap: the entry point for a ParallelCluster OnNodeConfigured custom action
# (runs as root) or `hpcflow bootstrap --hosts ...` over SSH.
#
# Usage: hpcflow-bootstrap.sh [--steps LIST] [--prefix DIR] [--dry-run] [--log-file FILE]
#                             [STEP OPTIONS...]
#   --steps LIST   comma-separated, in any order; run in numeric order.
#                  efa (10), nccl (20), nccl-tests (30), enroot-pyxis (40), spot-watch (50),
#                  healthcheck (90)
#                  Default: efa,nccl,nccl-tests,healthcheck (enroot-pyxis only when asked:
#                  ParallelCluster 3.11+ AMIs ship both; spot-watch only on spot nodes).
#   STEP OPTIONS   --instance-type/--expect-gpus/--expect-efa/--prolog-dir go to healthcheck.
#   --from-s3 URL  first copy lib/, steps/ and prolog/ from this S3 prefix with `aws s3 cp`
#                  (ParallelCluster downloads only the custom action's script itself).
#   --env NAME=VALUE  export an HPCFLOW_* setting for the steps (e.g. HPCFLOW_ENROOT_SHA256,
#                  HPCFLOW_NVCC_GENCODE); repeatable.
# In a cluster spec: bootstrap.on_node_configured: [{script: s3://B/P/hpcflow-bootstrap.sh,
#   args: [--from-s3, s3://B/P, --steps, "efa,nccl,healthcheck"]}]
#   (hpcflow cluster upload-bootstrap uploads the files and prints these lines).
# Exit codes: 0 every step succeeded; 1 a step failed (the first failure stops the run); 2 usage.
# Safe to rerun: every step is idempotent and says "nothing to do" when done.
set -Eeuo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
STEP_NAME="hpcflow-bootstrap"
readonly ALL_STEPS="efa,nccl,nccl-tests,enroot-pyxis,spot-watch,healthcheck"
readonly DEFAULT_STEPS="efa,nccl,nccl-tests,healthcheck"

step_file() {
  case "$1" in
    efa) echo 10-efa.sh ;;
    nccl) echo 20-nccl.sh ;;
    nccl-tests) echo 30-nccl-tests.sh ;;
    enroot-pyxis) echo 40-enroot-pyxis.sh ;;
    spot-watch) echo 50-spot-watch.sh ;;
    healthcheck) echo 90-healthcheck.sh ;;
    *) return 1 ;;
  esac
}

# fetch_tree URL: copy lib/, steps/ and prolog/ from an S3 prefix next to this script.
fetch_tree() {
  local url="${1%/}" d
  command -v aws >/dev/null 2>&1 || { printf 'error: --from-s3 needs the aws CLI\n' >&2; exit 1; }
  for d in lib steps prolog; do
    aws s3 cp --recursive --only-show-errors "${url}/${d}/" "${here}/${d}/"
  done
}

main() {
  local steps="${DEFAULT_STEPS}" pass=() s3=""
  while (($#)); do
    case "$1" in
      --steps) steps="${2:?--steps needs a list}"; shift 2 ;;
      --steps=*) steps="${1#--steps=}"; shift ;;
      --from-s3) s3="${2:?--from-s3 needs an s3:// prefix}"; shift 2 ;;
      --env)
        [[ "${2:-}" =~ ^HPCFLOW_[A-Z0-9_]+=.*$ ]] || {
          printf 'error: --env %s: give HPCFLOW_NAME=VALUE\n' "${2:-}" >&2
          exit 2
        }
        export "${2?}"
        shift 2
        ;;
      -h|--help) sed -n '2,19p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; return 0 ;;
      *) pass+=("$1"); shift ;;
    esac
  done
  [[ -z "${s3}" ]] || fetch_tree "${s3}"
  # shellcheck source=bootstrap/lib/common.sh
  source "${here}/lib/common.sh"
  DIE_CODE=2
  local s files=() wanted
  IFS=',' read -r -a wanted <<<"${steps}"
  ((${#wanted[@]})) || die "--steps: empty list; allowed: ${ALL_STEPS}"
  for s in "${wanted[@]}"; do
    step_file "${s}" >/dev/null || die "--steps: '${s}' is not a step; allowed: ${ALL_STEPS}"
    files+=("$(step_file "${s}")")
  done
  DIE_CODE=1
  local common=() health=() sorted
  # Split options: the common ones go to every step, the health check's only to it.
  set -- "${pass[@]}"
  while (($#)); do
    case "$1" in
      --instance-type|--expect-gpus|--expect-efa|--prolog-dir) health+=("$1" "${2:?$1 needs a value}"); shift 2 ;;
      --prefix|--log-file) common+=("$1" "${2:?$1 needs a value}"); shift 2 ;;
      --dry-run|--prefix=*|--log-file=*) common+=("$1"); shift ;;
      *) die "unknown argument '$1' (see --help)" ;;
    esac
  done
  mapfile -t sorted < <(printf '%s\n' "${files[@]}" | sort -u)
  for s in "${sorted[@]}"; do
    local extra=()
    [[ "${s}" != 90-healthcheck.sh ]] || extra=("${health[@]}")
    printf '== %s\n' "${s%.sh}"
    bash "${here}/steps/${s}" "${common[@]}" "${extra[@]}" || die "step ${s%.sh} failed"
  done
  printf '== done: %s\n' "${steps}"
}

if [[ "${BASH_SOURCE[0]}" == "${0}" ]]; then
  main "$@"
fi
