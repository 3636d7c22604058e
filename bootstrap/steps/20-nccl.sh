#!/usr/bin/env bash
# Step 20: NCCL and the aws-ofi-nccl plugin (NCCL's network plugin for libfabric/EFA).
#
# The plugin the EFA installer ships (PREFIX/opt/amazon/ofi-nccl/lib[/<triplet>]) is used where
# present; otherwise the pinned aws-ofi-nccl is built against the installer's libfabric. NCCL
# itself is built pinned, for the CUDA architectures of this node's GPUs (nvidia-smi compute_cap),
# into PREFIX/opt/hpcflow/nccl/<version>. The plugin's directory is recorded in
# PREFIX/var/lib/hpcflow/bootstrap/ofi-nccl.dir (read by the batch script of a job on an EFA
# instance) and named in PREFIX/etc/ld.so.conf.d/hpcflow-aws-ofi-nccl.conf, then ldconfig runs
# (not under a sandbox root), so NCCL's loader finds it.
#
# Usage: 20-nccl.sh [--prefix DIR] [--dry-run] [--log-file FILE]
# Environment (wins over the pinned defaults):
#   HPCFLOW_NCCL_VERSION, HPCFLOW_NCCL_SHA256, HPCFLOW_NCCL_URL
#   HPCFLOW_OFI_NCCL_VERSION, HPCFLOW_OFI_NCCL_SHA256, HPCFLOW_OFI_NCCL_URL
#   HPCFLOW_CUDA_HOME (default /usr/local/cuda), HPCFLOW_NVCC_GENCODE (default: from nvidia-smi)
# Exit codes: 0 done or nothing to do; 1 failure. Safe to rerun (state in PREFIX/var/lib/hpcflow).
#
# Pins and sha256 (GitHub source archives), from spack-packages:
#   repos/spack_repo/builtin/packages/nccl/package.py (commit 20e90b16):
#     version("2.27.7-1", sha256="98e6262bd55932c51e7c8ffc50cc764f019e4b94a8fd6694d839ae828ec8d128")
#   repos/spack_repo/builtin/packages/aws_ofi_nccl/package.py (commit 05260905):
#     version("1.17.3", sha256="0b3313e9ad48226cb143c8f1dead60bcd59a8083e582558ee44a438d58cc23c1")
# hpcflow could not download the archives to recompute these sums here.
set -Eeuo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
STEP_NAME="20-nccl"
# shellcheck source=bootstrap/lib/common.sh
source "${here}/../lib/common.sh"

readonly NCCL_VERSION="${HPCFLOW_NCCL_VERSION:-2.27.7-1}"
readonly NCCL_SHA256="${HPCFLOW_NCCL_SHA256:-98e6262bd55932c51e7c8ffc50cc764f019e4b94a8fd6694d839ae828ec8d128}"
readonly NCCL_URL="${HPCFLOW_NCCL_URL:-https://github.com/NVIDIA/nccl/archive/v${NCCL_VERSION}.tar.gz}"
readonly OFI_NCCL_VERSION="${HPCFLOW_OFI_NCCL_VERSION:-1.17.3}"
readonly OFI_NCCL_SHA256="${HPCFLOW_OFI_NCCL_SHA256:-0b3313e9ad48226cb143c8f1dead60bcd59a8083e582558ee44a438d58cc23c1}"
readonly OFI_NCCL_URL="${HPCFLOW_OFI_NCCL_URL:-https://github.com/aws/aws-ofi-nccl/archive/v${OFI_NCCL_VERSION}.tar.gz}"
readonly CUDA_HOME_DIR="${HPCFLOW_CUDA_HOME:-/usr/local/cuda}"

# shipped_plugin_dir: the directory holding the EFA installer's libnccl-net*.so, or "".
shipped_plugin_dir() {
  local d
  for d in "${PREFIX}/opt/amazon/ofi-nccl/lib" "${PREFIX}/opt/amazon/ofi-nccl/lib/x86_64-linux-gnu" \
           "${PREFIX}/opt/amazon/ofi-nccl/lib/aarch64-linux-gnu"; do
    if compgen -G "${d}/libnccl-net*.so" >/dev/null; then
      printf '%s\n' "${d}"
      return 0
    fi
  done
}

gencode_or_die() {
  local gencode="${HPCFLOW_NVCC_GENCODE:-}"
  [[ -n "${gencode}" ]] || gencode="$(cuda_gencode)"
  if [[ -z "${gencode}" ]] && ((DRY_RUN)); then
    gencode="(no GPU found by nvidia-smi: a real run stops here)"
  fi
  [[ -n "${gencode}" ]] || die "no GPU compute capability from nvidia-smi: cannot choose CUDA architectures (set HPCFLOW_NVCC_GENCODE, e.g. -gencode=arch=compute_90,code=sm_90)"
  printf '%s\n' "${gencode}"
}

# unpack TARBALL DIR: extract a GitHub source archive without its top-level folder.
unpack() {
  mkdir -p "$2"
  tar -xzf "$1" -C "$2" --strip-components=1
}

build_nccl() {
  local dest="${PREFIX}/opt/hpcflow/nccl/${NCCL_VERSION}"
  if [[ "$(done_version nccl)" == "${NCCL_VERSION}" && -d "${dest}/lib" ]]; then
    say "nccl: ${NCCL_VERSION} already built in ${dest}, nothing to do"
    return 0
  fi
  local tarball gencode
  tarball="$(cache_dir)/nccl-${NCCL_VERSION}.tar.gz"
  fetch_verified "${NCCL_URL}" "${NCCL_SHA256}" "${tarball}"
  gencode="$(gencode_or_die)"
  if ((DRY_RUN)); then
    printf 'would build: nccl %s (NVCC_GENCODE=%s) into %s\n' "${NCCL_VERSION}" "${gencode}" "${dest}"
    return 0
  fi
  need_cmd make tar
  unpack "${tarball}" "${WORK}/nccl"
  rm -rf "${dest}.tmp"
  (cd "${WORK}/nccl" && run make -j "$(nproc)" src.install PREFIX="${dest}.tmp" \
    CUDA_HOME="${CUDA_HOME_DIR}" NVCC_GENCODE="${gencode}") 2>&1 | tee -a "${LOG_FILE}" >&2 \
    || die "building nccl ${NCCL_VERSION} failed; see ${LOG_FILE}"
  compgen -G "${dest}.tmp/lib/libnccl.so*" >/dev/null || die "nccl build installed no lib/libnccl.so"
  rm -rf "${dest}"
  mv "${dest}.tmp" "${dest}"
  mark_done nccl "${NCCL_VERSION}"
  say "nccl: built ${NCCL_VERSION} into ${dest} (${gencode})"
}

plugin() {
  local shipped
  shipped="$(shipped_plugin_dir)"
  if [[ -n "${shipped}" ]]; then
    say "aws-ofi-nccl: using the plugin the EFA installer ships in ${shipped}, nothing to do"
    if ((DRY_RUN == 0)) && [[ "$(cat "${STATE_DIR}/ofi-nccl.dir" 2>/dev/null)" != "${shipped}" ]]; then
      printf '%s\n' "${shipped}" >"${STATE_DIR}/ofi-nccl.dir"
    fi
    return 0
  fi
  local dest="${PREFIX}/opt/hpcflow/aws-ofi-nccl/${OFI_NCCL_VERSION}"
  if [[ "$(done_version ofi-nccl)" == "${OFI_NCCL_VERSION}" && -d "${dest}/lib" ]]; then
    say "aws-ofi-nccl: ${OFI_NCCL_VERSION} already built in ${dest}, nothing to do"
    return 0
  fi
  local tarball libfabric="${PREFIX}/opt/amazon/efa"
  tarball="$(cache_dir)/aws-ofi-nccl-${OFI_NCCL_VERSION}.tar.gz"
  fetch_verified "${OFI_NCCL_URL}" "${OFI_NCCL_SHA256}" "${tarball}"
  if ((DRY_RUN)); then
    printf 'would build: aws-ofi-nccl %s against %s into %s\n' "${OFI_NCCL_VERSION}" "${libfabric}" "${dest}"
    return 0
  fi
  [[ -d "${libfabric}" ]] || die "no libfabric in ${libfabric}: run step 10-efa first"
  need_cmd make tar
  unpack "${tarball}" "${WORK}/ofi"
  rm -rf "${dest}.tmp"
  (cd "${WORK}/ofi" && { [[ ! -x ./autogen.sh ]] || run ./autogen.sh; } \
    && run ./configure --prefix="${dest}.tmp" --with-libfabric="${libfabric}" \
         --with-cuda="${CUDA_HOME_DIR}" --disable-tests \
    && run make -j "$(nproc)" install) 2>&1 | tee -a "${LOG_FILE}" >&2 \
    || die "building aws-ofi-nccl ${OFI_NCCL_VERSION} failed; see ${LOG_FILE}"
  compgen -G "${dest}.tmp/lib/libnccl-net*.so" >/dev/null || die "aws-ofi-nccl build installed no lib/libnccl-net*.so"
  rm -rf "${dest}"
  mv "${dest}.tmp" "${dest}"
  printf '%s\n' "${dest}/lib" >"${STATE_DIR}/ofi-nccl.dir"
  mark_done ofi-nccl "${OFI_NCCL_VERSION}"
  say "aws-ofi-nccl: built ${OFI_NCCL_VERSION} into ${dest}"
}

# register_with_loader: name the recorded plugin directory in
# PREFIX/etc/ld.so.conf.d/hpcflow-aws-ofi-nccl.conf and run ldconfig, so that NCCL's dlopen of
# libnccl-net.so finds it without LD_LIBRARY_PATH (ld.so(8): the cache ldconfig builds from
# /etc/ld.so.conf and its include of ld.so.conf.d/*.conf). Under a sandbox root (--prefix) the
# file is written but ldconfig is not run: it would rebuild the host's cache.
register_with_loader() {
  local dir conf="${PREFIX}/etc/ld.so.conf.d/hpcflow-aws-ofi-nccl.conf"
  dir="$(head -n 1 "${STATE_DIR}/ofi-nccl.dir" 2>/dev/null || true)"
  if [[ -z "${dir}" ]]; then
    ((DRY_RUN)) && printf 'would write: %s (the plugin directory, once known)\n' "${conf}"
    return 0
  fi
  if [[ "$(cat "${conf}" 2>/dev/null)" == "${dir}" ]]; then
    say "loader: ${dir} already in ${conf}, nothing to do"
    return 0
  fi
  if ((DRY_RUN)); then
    printf 'would write: %s (%s)\n' "${conf}" "${dir}"
    printf 'would run: ldconfig\n'
    return 0
  fi
  mkdir -p "$(dirname "${conf}")"
  printf '%s\n' "${dir}" >"${conf}.tmp"
  mv -f "${conf}.tmp" "${conf}"
  if [[ -z "${PREFIX}" ]]; then
    need_cmd ldconfig
    run ldconfig
    say "loader: ${dir} registered in ${conf} (ldconfig run)"
  else
    say "loader: ${dir} registered in ${conf} (sandbox root: ldconfig not run)"
  fi
}

main() {
  parse_common_args "$@"
  WORK="$(mktemp -d)"
  trap 'rm -rf "${WORK}"' EXIT
  build_nccl
  plugin
  register_with_loader
}

if [[ "${BASH_SOURCE[0]}" == "${0}" ]]; then
  main "$@"
fi
