#!/usr/bin/env bash
# Shared helpers for hpcflow's node bootstrap steps. Sourced, never run.
#
# Gives: log, warn, die, need_cmd, run (honours --dry-run), parse_common_args (--prefix,
# --dry-run, --log-file), sha256_of, fetch_verified (download + sha256 check), state files that
# make every step idempotent, and install_atomic (temp dir -> rename into place).
#
# Globals a step may read after parse_common_args: PREFIX (sandbox root, "" for /), DRY_RUN (0/1),
# LOG_FILE, STATE_DIR, REST_ARGS (arguments this parser did not know, for the step itself).
# Environment: HPCFLOW_BOOTSTRAP_PREFIX (default for --prefix), HPCFLOW_BOOTSTRAP_LOG (default log
# file), HPCFLOW_BOOTSTRAP_CACHE (download cache), HPCFLOW_BOOTSTRAP_LOOPBACK_HTTP (1: plain http
# downloads from 127.0.0.1 allowed; every other download URL must be https://).

# shellcheck disable=SC2034  # globals are read by the sourcing step scripts
STEP_NAME="${STEP_NAME:-$(basename "${0}" .sh)}"
PREFIX="${HPCFLOW_BOOTSTRAP_PREFIX:-}"
PREFIX="${PREFIX%/}"
DRY_RUN=0
LOG_FILE=""
STATE_DIR=""
REST_ARGS=()

# log MSG...: one timestamped line to stderr and, once set up, to the log file.
log() {
  local line
  line="$(date -u '+%Y-%m-%dT%H:%M:%SZ') ${STEP_NAME}: $*"
  printf '%s\n' "${line}" >&2
  if [[ -n "${LOG_FILE}" ]]; then
    printf '%s\n' "${line}" >>"${LOG_FILE}" 2>/dev/null || true
  fi
}

warn() { log "warning: $*"; }

# die MSG...: log an error and exit 1 (or the code in DIE_CODE).
die() {
  log "error: $*"
  exit "${DIE_CODE:-1}"
}

# need_cmd NAME...: stop unless every command is on PATH.
need_cmd() {
  local c
  for c in "$@"; do
    command -v "${c}" >/dev/null 2>&1 || die "command not found: ${c} (install it or put it on PATH)"
  done
}

# run CMD ARGS...: run a command that changes the system, or only print it under --dry-run.
run() {
  if ((DRY_RUN)); then
    local quoted
    quoted="$(printf '%q ' "$@")"
    printf 'would run: %s\n' "${quoted% }"
    log "dry-run: ${quoted% }"
    return 0
  fi
  log "+ $*"
  "$@"
}

# say MSG...: the step's result on stdout (and in the log).
say() {
  printf '%s\n' "$*"
  if [[ -n "${LOG_FILE}" ]]; then
    printf '%s %s: %s\n' "$(date -u '+%Y-%m-%dT%H:%M:%SZ')" "${STEP_NAME}" "$*" \
      >>"${LOG_FILE}" 2>/dev/null || true
  fi
}

usage_common() {
  cat <<USAGE
common options:
  --prefix DIR     install under DIR instead of / (a sandbox root; default: /, or
                   HPCFLOW_BOOTSTRAP_PREFIX)
  --dry-run        print what would be done, change nothing
  --log-file FILE  append the log here (default: PREFIX/var/log/hpcflow-bootstrap.log)
USAGE
}

# parse_common_args "$@": sets PREFIX, DRY_RUN, LOG_FILE, STATE_DIR; leaves the rest in REST_ARGS.
parse_common_args() {
  REST_ARGS=()
  while (($#)); do
    case "$1" in
      --prefix)
        (($# >= 2)) || die "--prefix needs a directory"
        PREFIX="${2%/}"; shift 2 ;;
      --prefix=*) PREFIX="${1#--prefix=}"; PREFIX="${PREFIX%/}"; shift ;;
      --dry-run) DRY_RUN=1; shift ;;
      --log-file)
        (($# >= 2)) || die "--log-file needs a file"
        LOG_FILE="$2"; shift 2 ;;
      --log-file=*) LOG_FILE="${1#--log-file=}"; shift ;;
      *) REST_ARGS+=("$1"); shift ;;
    esac
  done
  if [[ -n "${PREFIX}" && "${PREFIX}" != /* ]]; then
    die "--prefix: '${PREFIX}' is not an absolute path"
  fi
  # make (NCCL, nccl-tests, pyxis) cannot handle blanks or quotes in install paths.
  if [[ "${PREFIX}" =~ [[:space:]\'\"\$\`] ]]; then
    die "--prefix: '${PREFIX}' contains a blank, quote or \$; allowed: a path without them"
  fi
  LOG_FILE="${LOG_FILE:-${HPCFLOW_BOOTSTRAP_LOG:-${PREFIX}/var/log/hpcflow-bootstrap.log}}"
  STATE_DIR="${PREFIX}/var/lib/hpcflow/bootstrap"
  if ((DRY_RUN)); then
    # A dry run writes nothing, not even its log, unless the log directory already exists.
    [[ -d "$(dirname "${LOG_FILE}")" ]] || LOG_FILE=""
  else
    mkdir -p "$(dirname "${LOG_FILE}")" "${STATE_DIR}" || die "cannot create the log or state dir under '${PREFIX:-/}'"
  fi
}

# done_version NAME: the version recorded by a finished step, or "".
done_version() {
  local f="${STATE_DIR}/${1}.done"
  if [[ -f "${f}" ]]; then head -n 1 "${f}"; fi
}

# mark_done NAME VERSION: record that NAME is installed at VERSION (skipped under --dry-run).
mark_done() {
  ((DRY_RUN)) && return 0
  printf '%s\n' "$2" >"${STATE_DIR}/${1}.done.tmp"
  mv -f "${STATE_DIR}/${1}.done.tmp" "${STATE_DIR}/${1}.done"
}

sha256_of() {
  sha256sum "$1" | cut -d ' ' -f 1
}

# download_protocols URL: the curl --proto list URL may use, or die. https only, redirects
# included (curl(1) --proto, --proto-redir): a URL override to http://, file:// or anything else
# is refused. Plain http only to this node's loopback (127.0.0.1, localhost, [::1]) and only
# when HPCFLOW_BOOTSTRAP_LOOPBACK_HTTP=1 (a mirror on the node itself; the tests' server).
download_protocols() {
  local url="$1"
  if [[ "${url}" == https://* ]]; then
    printf '=https'
  elif [[ "${HPCFLOW_BOOTSTRAP_LOOPBACK_HTTP:-0}" == 1 \
          && "${url}" =~ ^http://(127\.0\.0\.1|localhost|\[::1\])(:[0-9]+)?/ ]]; then
    printf '=http'
  else
    die "download URL '${url}' is not https://; allowed: https:// URLs (plain http:// only to 127.0.0.1 with HPCFLOW_BOOTSTRAP_LOOPBACK_HTTP=1)"
  fi
}

# fetch_verified URL SHA256 DEST: download URL to DEST (kept when it already matches) and check
# its sha256. A mismatch deletes the download and stops: nothing downstream runs.
fetch_verified() {
  local url="$1" want="$2" dest="$3" got proto
  [[ "${want}" =~ ^[0-9a-f]{64}$ ]] || die "no valid pinned sha256 for ${url} (got '${want}'): refusing to download an unverified file"
  proto="$(download_protocols "${url}")" || exit 1
  if [[ -f "${dest}" ]] && [[ "$(sha256_of "${dest}")" == "${want}" ]]; then
    log "cached ${dest} (sha256 ok)"
    return 0
  fi
  if ((DRY_RUN)); then
    printf 'would download: %s (sha256 %s)\n' "${url}" "${want}"
    return 0
  fi
  need_cmd curl sha256sum
  mkdir -p "$(dirname "${dest}")"
  log "downloading ${url}"
  curl --fail --silent --show-error --location --proto "${proto}" --proto-redir "${proto}" \
    --retry 3 --output "${dest}.part" "${url}" \
    || { rm -f "${dest}.part"; die "download failed: ${url}"; }
  got="$(sha256_of "${dest}.part")"
  if [[ "${got}" != "${want}" ]]; then
    rm -f "${dest}.part"
    die "sha256 mismatch for ${url}: expected ${want}, got ${got}; nothing was installed"
  fi
  mv -f "${dest}.part" "${dest}"
  log "verified ${dest} (sha256 ${got})"
}

# cache_dir: where downloads are kept between runs.
cache_dir() {
  printf '%s\n' "${HPCFLOW_BOOTSTRAP_CACHE:-${PREFIX}/var/cache/hpcflow/bootstrap}"
}

# cuda_gencode: NVCC -gencode flags for the compute capabilities of this node's GPUs
# (nvidia-smi --query-gpu=compute_cap, e.g. "9.0" -> arch=compute_90,code=sm_90). Empty without GPUs.
cuda_gencode() {
  command -v nvidia-smi >/dev/null 2>&1 || return 0
  local caps cap flags=()
  caps="$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | tr -d ' ' | sort -u)" || return 0
  for cap in ${caps}; do
    [[ "${cap}" =~ ^[0-9]+\.[0-9]+$ ]] || continue
    flags+=("-gencode=arch=compute_${cap/./},code=sm_${cap/./}")
  done
  printf '%s\n' "${flags[*]:-}"
}
