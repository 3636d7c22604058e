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
#   --from-s3 URL  first copy lib/, steps/ and prolog/ from this s3:// prefix with `aws s3 cp`
#                  (ParallelCluster downloads only the custom action's script itself); every
#                  file must match its sha256 pinned below, or nothing fetched is used.
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
# s3://BUCKET[/PREFIX]: S3's bucket naming rules, and the prefix characters
# `hpcflow cluster upload-bootstrap --prefix` allows.
readonly S3_URL_RE="^s3://[a-z0-9][a-z0-9.-]{1,61}[a-z0-9](/[A-Za-z0-9!_.*'()/-]*)?$"

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

# The sha256 of every file --from-s3 fetches (sha256sum's format), checked before any of them is
# used: a step changed in the bucket after this script was uploaded is refused. This script is
# the root of that trust: whoever can write the S3 prefix can rewrite it too (docs/admin-guide.md,
# "As a ParallelCluster custom action"). tests/unit/bootstrap/test_bootstrap_pins.py keeps this
# list equal to the files (HPCFLOW_REGEN_GOLDEN=1 rewrites it).
readonly PINNED_SHA256='
# pinned-sha256-begin
9b0fece1abf20c503d18befc87a9ab160db1d102dda89edb2f2f7f856039dedc  lib/common.sh
f1e404ee567f64550505c637ec8a3bd8a4896ff5d9f7d3bcb8ea166eca43fb59  prolog/hpcflow-health.sh
004d8b70f8b8a32f14fdf94f1bd22997447e5cb621b141d5baafe9fcc6a3ad6e  steps/10-efa.sh
70e87047fdf7add8429d10c7fbd000f72ded1cb14b417b6ac8b9caf6b5944e0c  steps/20-nccl.sh
04bf3b2a2bada8e2ab9d29aea6b4af9521ea9dfd92da346f7100c19cd07ea4f5  steps/30-nccl-tests.sh
434b093b2af977a7fb9e046468e14f4523dc1a32845a078fe8836c0e7444cc21  steps/40-enroot-pyxis.sh
a67b97c1c69c3ec18b1ca83234d2144cf873cf2e7b7f1b1671410e05e429a9d7  steps/50-spot-watch.sh
3be93c7649190f6921fb32aaeb126d4fe4ce47906a667c76a4d139264bec18dc  steps/90-healthcheck.sh
# pinned-sha256-end
'

# fetch_tree URL: copy lib/, steps/ and prolog/ from an S3 prefix into a private temporary folder,
# check each file against PINNED_SHA256, then put the pinned files next to this script (each
# renamed into place, so a link there is replaced, not followed). Files that are not pinned are
# left out.
fetch_tree() {
  local url="${1%/}" d tmp sum path
  if [[ ! "${url}" =~ ${S3_URL_RE} ]]; then
    printf 'error: --from-s3 %s: give an s3://BUCKET/PREFIX (S3 bucket naming rules)\n' "$1" >&2
    exit 2
  fi
  command -v aws >/dev/null 2>&1 || { printf 'error: --from-s3 needs the aws CLI\n' >&2; exit 1; }
  tmp="$(mktemp -d)"
  for d in lib steps prolog; do
    aws s3 cp --recursive --only-show-errors "${url}/${d}/" "${tmp}/${d}/"
  done
  if ! (cd "${tmp}" && grep -v -e '^#' -e '^$' <<<"${PINNED_SHA256}" \
        | sha256sum --check --strict --quiet); then
    rm -rf -- "${tmp}"
    printf 'error: --from-s3 %s: the fetched files do not match the sha256 pinned in %s; nothing fetched is used (upload this hpcflow version'"'"'s bootstrap/ again)\n' \
      "${url}" "${BASH_SOURCE[0]}" >&2
    exit 1
  fi
  while read -r sum path; do
    [[ -n "${sum}" && "${sum}" != "#"* ]] || continue
    mkdir -p -- "${here}/$(dirname -- "${path}")"
    cp -- "${tmp}/${path}" "${here}/${path}.fetched.$$"
    mv -fT -- "${here}/${path}.fetched.$$" "${here}/${path}"
  done <<<"${PINNED_SHA256}"
  rm -rf -- "${tmp}"
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
      -h|--help) sed -n '2,20p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; return 0 ;;
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
