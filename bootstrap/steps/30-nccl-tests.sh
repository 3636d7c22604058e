#!/usr/bin/env bash
# Step 30: build NVIDIA nccl-tests (all_reduce_perf, ...) pinned, against the NCCL from step 20,
# with MPI when the EFA installer's Open MPI is present (needed to run across nodes).
# Binaries go to PREFIX/opt/hpcflow/nccl-tests/<version>/bin.
#
# Usage: 30-nccl-tests.sh [--prefix DIR] [--dry-run] [--log-file FILE]
# Environment (wins over the pinned defaults): HPCFLOW_NCCL_TESTS_VERSION, HPCFLOW_NCCL_TESTS_SHA256,
#   HPCFLOW_NCCL_TESTS_URL, HPCFLOW_CUDA_HOME, HPCFLOW_NVCC_GENCODE, HPCFLOW_NCCL_VERSION.
# Exit codes: 0 done or nothing to do; 1 failure. Safe to rerun.
#
# Pin and sha256 (GitHub source archive), from spack-packages
# repos/spack_repo/builtin/packages/nccl_tests/package.py (commit d9bc1530):
#   version("2.17.6", sha256="38974e70342150ede0e3fb8fd24bfe60ccbde90fa20241716ba8bb338e6b61a0")
# hpcflow could not download the archive to recompute the sum here.
set -Eeuo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
STEP_NAME="30-nccl-tests"
# shellcheck source=bootstrap/lib/common.sh
source "${here}/../lib/common.sh"

readonly TESTS_VERSION="${HPCFLOW_NCCL_TESTS_VERSION:-2.17.6}"
readonly TESTS_SHA256="${HPCFLOW_NCCL_TESTS_SHA256:-38974e70342150ede0e3fb8fd24bfe60ccbde90fa20241716ba8bb338e6b61a0}"
readonly TESTS_URL="${HPCFLOW_NCCL_TESTS_URL:-https://github.com/NVIDIA/nccl-tests/archive/v${TESTS_VERSION}.tar.gz}"
readonly NCCL_VERSION="${HPCFLOW_NCCL_VERSION:-2.27.7-1}"
readonly CUDA_HOME_DIR="${HPCFLOW_CUDA_HOME:-/usr/local/cuda}"

main() {
  parse_common_args "$@"
  local dest="${PREFIX}/opt/hpcflow/nccl-tests/${TESTS_VERSION}"
  if [[ "$(done_version nccl-tests)" == "${TESTS_VERSION}" && -x "${dest}/bin/all_reduce_perf" ]]; then
    say "nccl-tests: ${TESTS_VERSION} already built in ${dest}, nothing to do"
    return 0
  fi
  local nccl_home="${PREFIX}/opt/hpcflow/nccl/${NCCL_VERSION}" mpi_home="${PREFIX}/opt/amazon/openmpi"
  local tarball gencode mpi=(MPI=0)
  tarball="$(cache_dir)/nccl-tests-${TESTS_VERSION}.tar.gz"
  fetch_verified "${TESTS_URL}" "${TESTS_SHA256}" "${tarball}"
  gencode="${HPCFLOW_NVCC_GENCODE:-$(cuda_gencode)}"
  [[ -d "${mpi_home}" ]] && mpi=(MPI=1 "MPI_HOME=${mpi_home}")
  if ((DRY_RUN)); then
    printf 'would build: nccl-tests %s (NCCL_HOME=%s %s NVCC_GENCODE=%s) into %s\n' \
      "${TESTS_VERSION}" "${nccl_home}" "${mpi[*]}" "${gencode:-?}" "${dest}"
    return 0
  fi
  [[ -n "${gencode}" ]] || die "no GPU compute capability from nvidia-smi: cannot choose CUDA architectures (set HPCFLOW_NVCC_GENCODE)"
  [[ -d "${nccl_home}/lib" ]] || die "no NCCL in ${nccl_home}: run step 20-nccl first"
  need_cmd make tar
  WORK="$(mktemp -d)"
  trap 'rm -rf "${WORK}"' EXIT
  tar -xzf "${tarball}" -C "${WORK}" --strip-components=1
  (cd "${WORK}" && run make -j "$(nproc)" "${mpi[@]}" NCCL_HOME="${nccl_home}" \
    CUDA_HOME="${CUDA_HOME_DIR}" NVCC_GENCODE="${gencode}") 2>&1 | tee -a "${LOG_FILE}" >&2 \
    || die "building nccl-tests ${TESTS_VERSION} failed; see ${LOG_FILE}"
  [[ -x "${WORK}/build/all_reduce_perf" ]] || die "nccl-tests build produced no build/all_reduce_perf"
  rm -rf "${dest}.tmp" && mkdir -p "${dest}.tmp/bin"
  find "${WORK}/build" -maxdepth 1 -type f -name '*_perf' -exec cp -p {} "${dest}.tmp/bin/" \;
  rm -rf "${dest}"
  mv "${dest}.tmp" "${dest}"
  mark_done nccl-tests "${TESTS_VERSION}"
  say "nccl-tests: built ${TESTS_VERSION} into ${dest}"
}

if [[ "${BASH_SOURCE[0]}" == "${0}" ]]; then
  main "$@"
fi
