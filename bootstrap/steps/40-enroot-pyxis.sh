#!/usr/bin/env bash
# Step 40: enroot (container runtime) and pyxis (its Slurm SPANK plugin, `srun --container-image`),
# only where they are absent: ParallelCluster AMIs ship both since 3.11.0 (aws-parallelcluster-
# cookbook CHANGELOG 3.11.0, "Install enroot and pyxis in official pcluster AMIs"; 3.11.1 turned
# pyxis off by default, see its CHANGELOG).
#
# Usage: 40-enroot-pyxis.sh [--prefix DIR] [--dry-run] [--log-file FILE]
# Environment:
#   HPCFLOW_ENROOT_VERSION (3.4.1), HPCFLOW_PYXIS_VERSION (0.20.0): the versions ParallelCluster's
#     cookbook pins (cookbooks/aws-parallelcluster-platform/attributes/platform.rb,
#     cookbooks/aws-parallelcluster-slurm/attributes/slurm_attributes.rb, commit f75d84c3).
#   HPCFLOW_ENROOT_SHA256, HPCFLOW_PYXIS_SHA256: sha256 of the enroot .deb/.rpm and the pyxis
#     source archive. No default: no public source hpcflow could check publishes them (the
#     cookbook downloads both without a checksum), so hpcflow installs nothing unverified and
#     stops with a message when they are needed and not set.
#   HPCFLOW_ENROOT_URL, HPCFLOW_PYXIS_URL: override the GitHub release URLs.
#   HPCFLOW_SLURM_DIR (default PREFIX/opt/slurm): Slurm's install root (headers, plugstack.conf.d).
# Exit codes: 0 present, installed, or dry run; 1 failure or missing checksum. Safe to rerun.
set -Eeuo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
STEP_NAME="40-enroot-pyxis"
# shellcheck source=bootstrap/lib/common.sh
source "${here}/../lib/common.sh"

readonly ENROOT_VERSION="${HPCFLOW_ENROOT_VERSION:-3.4.1}"
readonly PYXIS_VERSION="${HPCFLOW_PYXIS_VERSION:-0.20.0}"
readonly ENROOT_SHA256="${HPCFLOW_ENROOT_SHA256:-}"
readonly PYXIS_SHA256="${HPCFLOW_PYXIS_SHA256:-}"

have_enroot() {
  [[ -x "${PREFIX}/usr/bin/enroot" ]] && return 0
  [[ -z "${PREFIX}" ]] && command -v enroot >/dev/null 2>&1
}

have_pyxis() {
  local d
  for d in "${SLURM_DIR}/lib/slurm" "${PREFIX}/usr/local/lib/slurm" "${PREFIX}/usr/lib64/slurm" \
           "${PREFIX}/usr/lib/x86_64-linux-gnu/slurm-wlm" "${PREFIX}/usr/lib/x86_64-linux-gnu/slurm"; do
    [[ -f "${d}/spank_pyxis.so" ]] && return 0
  done
  return 1
}

install_enroot() {
  local arch pkg url
  if command -v dpkg >/dev/null 2>&1; then
    arch="$(dpkg --print-architecture)"
    pkg="enroot_${ENROOT_VERSION}-1_${arch}.deb"
  else
    arch="$(uname -m)"
    pkg="enroot-${ENROOT_VERSION}-1.el8.${arch}.rpm"
  fi
  url="${HPCFLOW_ENROOT_URL:-https://github.com/NVIDIA/enroot/releases/download/v${ENROOT_VERSION}/${pkg}}"
  [[ -n "${ENROOT_SHA256}" ]] || die "enroot is absent and HPCFLOW_ENROOT_SHA256 is not set: hpcflow pins no checksum for ${pkg} (none is published where it could be checked); compute it from a copy you trust and set it"
  fetch_verified "${url}" "${ENROOT_SHA256}" "$(cache_dir)/${pkg}"
  if [[ "${pkg}" == *.deb ]]; then
    run dpkg --root="${PREFIX:-/}" -i "$(cache_dir)/${pkg}"
  else
    run rpm --root="${PREFIX:-/}" -i "$(cache_dir)/${pkg}"
  fi
}

install_pyxis() {
  local url="${HPCFLOW_PYXIS_URL:-https://github.com/NVIDIA/pyxis/archive/refs/tags/v${PYXIS_VERSION}.tar.gz}"
  local tarball
  tarball="$(cache_dir)/pyxis-${PYXIS_VERSION}.tar.gz"
  [[ -n "${PYXIS_SHA256}" ]] || die "pyxis is absent and HPCFLOW_PYXIS_SHA256 is not set: hpcflow pins no checksum for pyxis ${PYXIS_VERSION} (none is published where it could be checked); compute it from a copy you trust and set it"
  fetch_verified "${url}" "${PYXIS_SHA256}" "${tarball}"
  if ((DRY_RUN)); then
    printf 'would build: pyxis %s into %s/lib/slurm\n' "${PYXIS_VERSION}" "${SLURM_DIR}"
    return 0
  fi
  need_cmd make tar
  local work
  work="$(mktemp -d)"
  tar -xzf "${tarball}" -C "${work}" --strip-components=1
  # CPPFLAGS goes in the environment: pyxis' Makefile appends it to its own flags, and a
  # command-line CPPFLAGS would replace them (make's override rule).
  (cd "${work}" && export CPPFLAGS="-I ${SLURM_DIR}/include" && run make \
    && run make install prefix="${SLURM_DIR}" libdir="${SLURM_DIR}/lib") 2>&1 | tee -a "${LOG_FILE}" >&2 \
    || die "building pyxis ${PYXIS_VERSION} failed; see ${LOG_FILE}"
  rm -rf "${work}"
  mkdir -p "${SLURM_DIR}/etc/plugstack.conf.d"
  printf 'required %s/lib/slurm/spank_pyxis.so\n' "${SLURM_DIR}" >"${SLURM_DIR}/etc/plugstack.conf.d/pyxis.conf"
}

main() {
  parse_common_args "$@"
  SLURM_DIR="${HPCFLOW_SLURM_DIR:-${PREFIX}/opt/slurm}"
  local todo=0
  if have_enroot; then say "enroot: present, nothing to do"; else todo=1; install_enroot; fi
  if have_pyxis; then say "pyxis: present, nothing to do"; else todo=1; install_pyxis; fi
  # ParallelCluster 3.11.1+ ships pyxis turned off: say so rather than enable it behind the
  # admin's back (it takes a Slurm restart).
  if ((DRY_RUN == 0)) && ! grep -rqs spank_pyxis "${SLURM_DIR}/etc/plugstack.conf" "${SLURM_DIR}/etc/plugstack.conf.d"; then
    warn "pyxis is not enabled: no plugstack.conf entry names spank_pyxis.so under ${SLURM_DIR}/etc (see ParallelCluster's pyxis docs)"
  fi
  ((todo == 0)) || ((DRY_RUN)) || say "enroot-pyxis: installed enroot ${ENROOT_VERSION} / pyxis ${PYXIS_VERSION} where absent"
}

if [[ "${BASH_SOURCE[0]}" == "${0}" ]]; then
  main "$@"
fi
