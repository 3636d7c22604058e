#!/usr/bin/env bash
# Step 10: install the AWS EFA software stack (kernel module, libfabric, rdma-core, Open MPI and,
# in current installers, the aws-ofi-nccl plugin) from a pinned, sha256-verified installer.
#
# Usage: 10-efa.sh [--prefix DIR] [--dry-run] [--log-file FILE] [-- INSTALLER_ARGS...]
# Environment (the environment wins over the pinned defaults):
#   HPCFLOW_EFA_VERSION   installer version           (default 1.34.0)
#   HPCFLOW_EFA_SHA256    sha256 of its tarball        (default: the pinned value below)
#   HPCFLOW_EFA_URL_BASE  where tarballs are fetched   (default https://efa-installer.amazonaws.com)
# Exit codes: 0 installed or already installed; 1 failure (download, sha256 mismatch, installer).
# Safe to rerun: skipped when PREFIX/opt/amazon/efa_installed_packages names this version.
#
# Pinned version and sha256: aws-parallelcluster-cookbook commit 2c0c4cec ("Upgrade EFA to 1.34.0"),
# cookbooks/aws-parallelcluster-environment/attributes/environment.rb:
#   default['cluster']['efa']['version'] = '1.34.0'
#   default['cluster']['efa']['sha256'] = 'bd68839e741b0afd3ec2e37d50603803cfa7a279c120f0a736cc57c2ff2d7fdc'
# The URL scheme is the cookbook's (resources/efa/partial/_common.rb). The sha256 is taken from
# that pin; hpcflow could not download the tarball to recompute it here.
set -Eeuo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
STEP_NAME="10-efa"
# shellcheck source=bootstrap/lib/common.sh
source "${here}/../lib/common.sh"

readonly EFA_VERSION="${HPCFLOW_EFA_VERSION:-1.34.0}"
readonly EFA_SHA256="${HPCFLOW_EFA_SHA256:-bd68839e741b0afd3ec2e37d50603803cfa7a279c120f0a736cc57c2ff2d7fdc}"
readonly EFA_URL_BASE="${HPCFLOW_EFA_URL_BASE:-https://efa-installer.amazonaws.com}"

# installed_efa_version: the version in the installer's own record, e.g.
# "# EFA installer version: 1.34.0" (first line of /opt/amazon/efa_installed_packages).
installed_efa_version() {
  local f="${PREFIX}/opt/amazon/efa_installed_packages"
  [[ -f "${f}" ]] || return 0
  sed -n 's/.*EFA installer version: *\([0-9][0-9.]*\).*/\1/p' "${f}" | head -n 1
}

main() {
  parse_common_args "$@"
  local have
  have="$(installed_efa_version)"
  if [[ "${have}" == "${EFA_VERSION}" ]]; then
    say "efa: installer ${EFA_VERSION} already installed, nothing to do"
    return 0
  fi
  [[ -z "${have}" ]] || log "EFA installer ${have} found; installing the pinned ${EFA_VERSION}"
  local tarball url
  tarball="$(cache_dir)/aws-efa-installer-${EFA_VERSION}.tar.gz"
  url="${EFA_URL_BASE}/aws-efa-installer-${EFA_VERSION}.tar.gz"
  fetch_verified "${url}" "${EFA_SHA256}" "${tarball}"
  if ((DRY_RUN)); then
    printf 'would run: efa_installer.sh -y %s (from %s)\n' "${REST_ARGS[*]:-}" "${tarball}"
    return 0
  fi
  need_cmd tar
  WORK="$(mktemp -d)"
  trap 'rm -rf "${WORK}"' EXIT
  tar -xzf "${tarball}" -C "${WORK}"
  [[ -x "${WORK}/aws-efa-installer/efa_installer.sh" ]] \
    || die "${tarball} has no aws-efa-installer/efa_installer.sh"
  # HPCFLOW_PREFIX tells a sandboxed test installer where the root is; AWS's installer ignores it.
  # The installer's own output goes to stderr and the log file.
  (cd "${WORK}/aws-efa-installer" && export HPCFLOW_PREFIX="${PREFIX}" \
    && run ./efa_installer.sh -y "${REST_ARGS[@]}") 2>&1 | tee -a "${LOG_FILE}" >&2 \
    || die "efa_installer.sh failed; see ${LOG_FILE}"
  have="$(installed_efa_version)"
  [[ "${have}" == "${EFA_VERSION}" ]] \
    || die "efa_installer.sh finished but ${PREFIX}/opt/amazon/efa_installed_packages does not name ${EFA_VERSION}"
  mark_done efa "${EFA_VERSION}"
  say "efa: installed EFA installer ${EFA_VERSION}"
}

if [[ "${BASH_SOURCE[0]}" == "${0}" ]]; then
  main "$@"
fi
