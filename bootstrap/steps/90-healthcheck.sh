#!/usr/bin/env bash
# Step 90: install the GPU/EFA health check as a Slurm prolog.d script and record what this node
# should have. ParallelCluster runs every script in /opt/slurm/etc/scripts/prolog.d/ as the prolog
# (it forbids setting Prolog in CustomSlurmSettings).
#
# Usage: 90-healthcheck.sh [--prefix DIR] [--dry-run] [--log-file FILE]
#          [--instance-type TYPE] [--expect-gpus N] [--expect-efa N] [--prolog-dir DIR]
#   --instance-type  default: the instance metadata service (IMDSv2) at check time
#   --expect-gpus/--expect-efa  override the figures of the instance type (e.g. --expect-efa 0 on
#                    a queue without EFA)
#   --prolog-dir     default PREFIX/opt/slurm/etc/scripts/prolog.d
# Exit codes: 0 installed or unchanged; 1 failure. Safe to rerun: an identical install is left alone.
set -Eeuo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
STEP_NAME="90-healthcheck"
# shellcheck source=bootstrap/lib/common.sh
source "${here}/../lib/common.sh"

readonly PROLOG_SRC="${here}/../prolog/hpcflow-health.sh"

main() {
  parse_common_args "$@"
  local itype="" gpus="" efa="" prolog_dir="${PREFIX}/opt/slurm/etc/scripts/prolog.d"
  set -- "${REST_ARGS[@]}"
  while (($#)); do
    case "$1" in
      --instance-type) itype="${2:?--instance-type needs a type}"; shift 2 ;;
      --expect-gpus) gpus="${2:?--expect-gpus needs a number}"; shift 2 ;;
      --expect-efa) efa="${2:?--expect-efa needs a number}"; shift 2 ;;
      --prolog-dir) prolog_dir="${2:?--prolog-dir needs a directory}"; shift 2 ;;
      *) die "unknown argument '$1'; allowed: --instance-type, --expect-gpus, --expect-efa, --prolog-dir" ;;
    esac
  done
  local n
  for n in "${gpus}" "${efa}"; do
    [[ -z "${n}" || "${n}" =~ ^[0-9]+$ ]] || die "--expect-gpus/--expect-efa: '${n}' is not a whole number"
  done
  [[ -f "${PROLOG_SRC}" ]] || die "missing ${PROLOG_SRC}"
  local conf="${PREFIX}/etc/hpcflow/health.env" target="${prolog_dir}/90-hpcflow-health.sh" want
  want="$(printf 'INSTANCE_TYPE=%q\nEXPECT_GPUS=%q\nEXPECT_EFA=%q\n' "${itype}" "${gpus}" "${efa}")"
  # The installed prolog reads its settings from the sandboxed conf when PREFIX is set.
  local prolog
  prolog="$(sed "s|/etc/hpcflow/health.env|${PREFIX}/etc/hpcflow/health.env|" "${PROLOG_SRC}")"
  if [[ -f "${target}" && "$(cat "${target}")" == "${prolog}" \
        && -f "${conf}" && "$(cat "${conf}")" == "${want}" ]]; then
    say "healthcheck: ${target} already installed, nothing to do"
    return 0
  fi
  if ((DRY_RUN)); then
    printf 'would install: %s and %s\n' "${target}" "${conf}"
    return 0
  fi
  mkdir -p "${prolog_dir}" "$(dirname "${conf}")"
  printf '%s\n' "${want}" >"${conf}.tmp" && mv -f "${conf}.tmp" "${conf}"
  printf '%s\n' "${prolog}" >"${target}.tmp"
  chmod 0755 "${target}.tmp"
  mv -f "${target}.tmp" "${target}"
  mark_done healthcheck "installed"
  say "healthcheck: installed ${target}"
}

if [[ "${BASH_SOURCE[0]}" == "${0}" ]]; then
  main "$@"
fi
