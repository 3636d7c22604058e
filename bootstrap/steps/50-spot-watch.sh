#!/usr/bin/env bash
# Step 50: run `hpcflow spot-watch` on this node as the systemd service hpcflow-spot-watch. It
# polls the instance metadata service (IMDSv2) for a spot interruption notice and sends the
# hpcflow jobs on the node their preemption signal (docs/spot.md). Only when asked
# (--steps ...,spot-watch): an on-demand node never gets a notice.
#
# Usage: 50-spot-watch.sh [--prefix DIR] [--dry-run] [--log-file FILE]
#          [--hpcflow PATH] [--interval-s N] [--endpoint URL] [--node NAME] [--slurm-bin DIR]
#   --hpcflow     the hpcflow command the service runs (default: `command -v hpcflow`)
#   --interval-s  seconds between polls (default 5, AWS's advice: EC2 User Guide, "Spot Instance
#                 interruption notices")
#   --endpoint    metadata service URL (default http://169.254.169.254)
#   --node        this node's Slurm name (default: the watcher's own, the short host name)
#   --slurm-bin   folder of squeue/scontrol/scancel, put first on the service's PATH (default:
#                 the folder of `command -v squeue`, else /opt/slurm/bin as on ParallelCluster)
#   Each option's default may also come from the environment (from the entry script:
#   `--env NAME=VALUE`): HPCFLOW_SPOT_HPCFLOW, HPCFLOW_SPOT_INTERVAL_S, HPCFLOW_SPOT_ENDPOINT,
#   HPCFLOW_SPOT_NODE, HPCFLOW_SPOT_SLURM_BIN.
# Writes PREFIX/etc/systemd/system/hpcflow-spot-watch.service and PREFIX/etc/hpcflow/spot-watch.env.
# Without --prefix: systemctl daemon-reload, then enable --now (restart when the settings
# changed). With --prefix: `systemctl --root=PREFIX enable` only (offline; nothing is started).
# Environment: HPCFLOW_SYSTEMCTL (default systemctl).
# The service runs as root: --hpcflow, its #! interpreter and its virtual environment must be
# root-owned and writable by root alone, each folder above them too, and so must what the
# environment reaches outside itself (symbolic links' targets, folders a .pth file or an
# editable install adds), and --slurm-bin with everything in it (else exit 1, naming the part
# at fault).
# Exit codes: 0 installed, unchanged or dry run; 1 failure. Safe to rerun: an identical install
# is left alone.
set -Eeuo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
STEP_NAME="50-spot-watch"
# shellcheck source=bootstrap/lib/common.sh
source "${here}/../lib/common.sh"

readonly UNIT="hpcflow-spot-watch.service"
readonly SYSTEMCTL="${HPCFLOW_SYSTEMCTL:-systemctl}"

# unit_text HPCFLOW ENV_FILE: the service unit (systemd.service(5), systemd.exec(5)).
unit_text() {
  cat <<UNIT_EOF
[Unit]
Description=hpcflow spot interruption watcher (IMDSv2 notice -> Slurm preemption signal)
Wants=network-online.target
After=network-online.target slurmd.service

[Service]
Type=simple
EnvironmentFile=$2
ExecStart=$1 spot-watch
Restart=always
RestartSec=5
# Root is needed for scancel on any user's job, and to drop to each job's owner for its files
# (CAP_SETUID, CAP_SETGID); nothing else (docs/spot.md, "What runs as root").
CapabilityBoundingSet=CAP_SETUID CAP_SETGID
NoNewPrivileges=yes
# /usr, /boot and /etc read-only. Not ProtectHome: run directories live under /home too, and
# the notice files are written there (as each job's owner).
ProtectSystem=full
PrivateTmp=yes
PrivateDevices=yes
ProtectKernelTunables=yes
ProtectKernelModules=yes
ProtectKernelLogs=yes
ProtectControlGroups=yes
ProtectClock=yes
ProtectHostname=yes
RestrictSUIDSGID=yes
RestrictRealtime=yes
RestrictNamespaces=yes
LockPersonality=yes
SystemCallArchitectures=native
RestrictAddressFamilies=AF_UNIX AF_INET AF_INET6 AF_NETLINK
UMask=0077

[Install]
WantedBy=multi-user.target
UNIT_EOF
}

# path_problem PATH: why PATH cannot be trusted by a root service, or nothing. Trusted: owned by
# root and writable by no one else; a root-owned folder with the sticky bit (as /tmp) may be
# writable by all, since others cannot rename or delete what they do not own there (chmod(1),
# "restricted deletion flag"). A symbolic link only needs a root owner: its target is checked
# through the resolved path.
path_problem() {
  local uid mode kind
  read -r uid mode kind < <(stat -c '%u %a %F' -- "$1" 2>/dev/null) || { printf 'missing'; return 0; }
  if [[ "${uid}" != 0 ]]; then
    printf 'owned by uid %s, not root' "${uid}"
  elif [[ "${kind}" != "symbolic link" ]] && (((8#${mode}) & 8#022)); then
    if [[ "${kind}" != directory ]] || ! (((8#${mode}) & 8#1000)); then
      printf 'writable by group or others (mode %s)' "${mode}"
    fi
  fi
}

# check_trusted WHAT PATH: stop unless PATH, as given and resolved, and every folder above it
# pass path_problem.
check_trusted() {
  local what="$1" path="$2" p problem resolved
  resolved="$(readlink -f -- "${path}")" || die "${what}: '${path}' cannot be resolved"
  for p in "${path}" "${resolved}"; do
    while :; do
      problem="$(path_problem "${p}")"
      [[ -z "${problem}" ]] || die "${what}: '${path}' is not safe for a service that runs as root: ${p} is ${problem}; install hpcflow where only root can write (e.g. a venv that root made under /opt)"
      [[ "${p}" != / ]] || break
      p="$(dirname -- "${p}")"
    done
  done
}

# check_hpcflow PATH: the command, the interpreter of its #! line, and, when it sits in a
# virtual environment (pyvenv.cfg two folders up), every file of that environment must be
# root's alone: whoever can change any of them runs code as root on every node. So must what
# the environment reaches outside itself: the target of each symbolic link in it (a package
# linked in from elsewhere) and each folder it imports from (check_imports).
check_hpcflow() {
  local hpcflow="$1" resolved venv interp="" line="" bad target
  check_trusted --hpcflow "${hpcflow}"
  resolved="$(readlink -f -- "${hpcflow}")"
  IFS= read -r line <"${resolved}" || true
  if [[ "${line}" == '#!'* ]]; then
    read -r interp _ <<<"${line#'#!'}"
    [[ "${interp}" != /* ]] || check_trusted "--hpcflow's interpreter" "${interp}"
  fi
  venv="$(dirname -- "$(dirname -- "${resolved}")")"
  if [[ -f "${venv}/pyvenv.cfg" ]]; then
    bad="$(find "${venv}" ! -type l \( ! -user 0 -o -perm /022 \) -print -quit 2>/dev/null)"
    [[ -z "${bad}" ]] || die "--hpcflow: '${hpcflow}' is not safe for a service that runs as root: ${bad} (in its environment ${venv}) is $(path_problem "${bad}"); make every file of ${venv} root's, writable only by root"
    while IFS= read -r -d '' line; do
      target="$(readlink -m -- "${line}")"
      check_tree "--hpcflow" "${hpcflow}" "${target}" "the target of ${line} (in its environment ${venv})"
    done < <(find "${venv}" -type l -print0 2>/dev/null)
    check_imports "${hpcflow}" "${venv}"
  fi
}

# check_tree OPTION VALUE PATH WHY [chain]: stop unless PATH (or, when it is missing, the folder
# it would be made in), every folder above it and, for a folder, everything under it (not with
# "chain") pass path_problem.
check_tree() {
  local option="$1" value="$2" path="$3" why="$4" only="${5:-}" p problem bad
  p="${path}"
  while [[ ! -e "${p}" && "${p}" != / ]]; do p="$(dirname -- "${p}")"; done
  while :; do
    problem="$(path_problem "${p}")"
    [[ -z "${problem}" ]] || die "${option}: '${value}' is not safe for a service that runs as root: ${path}, ${why}, is under ${p}, which is ${problem}"
    [[ "${p}" != / ]] || break
    p="$(dirname -- "${p}")"
  done
  if [[ -d "${path}" && "${only}" != chain ]]; then
    bad="$(find -L "${path}" ! -type l \( ! -user 0 -o -perm /022 \) -print -quit 2>/dev/null \
           || true)"
    [[ -z "${bad}" ]] || die "${option}: '${value}' is not safe for a service that runs as root: ${bad} (under ${path}, ${why}) is $(path_problem "${bad}")"
  fi
}

# check_imports HPCFLOW VENV: the folders VENV's Python imports from outside it must be root's
# alone: each path line of a .pth file in its site-packages (Python's site module: a line that
# does not start with "import" is a folder added to sys.path), each folder an editable install
# maps a package to (setuptools' __editable___*_finder.py) and each .egg-link's folder.
check_imports() {
  local hpcflow="$1" venv="$2" site f line
  for site in "${venv}"/lib/python*/site-packages; do
    [[ -d "${site}" ]] || continue
    for f in "${site}"/*.pth; do
      [[ -f "${f}" ]] || continue
      while IFS= read -r line || [[ -n "${line}" ]]; do
        [[ -n "${line//[[:space:]]/}" && "${line}" != '#'* && ! "${line}" =~ ^import[[:space:]] ]] || continue
        [[ "${line}" == /* ]] || line="${site}/${line}"
        check_tree "--hpcflow" "${hpcflow}" "${line}" "a folder ${f} puts on sys.path"
      done <"${f}"
    done
    for f in "${site}"/__editable___*_finder.py "${site}"/*.egg-link; do
      [[ -f "${f}" ]] || continue
      while IFS= read -r line; do
        check_tree "--hpcflow" "${hpcflow}" "${line}" "a folder ${f} imports from"
      done < <(if [[ "${f}" == *.egg-link ]]; then head -n 1 -- "${f}"
               else grep -oE "'/[^']+'" -- "${f}" | tr -d "'"; fi)
    done
  done
}

# check_slurm_bin DIR: the folder put first on the service's PATH (it runs squeue, scontrol and
# scancel from it, and a #! of `/usr/bin/env python3` would find python3 there): the folder, or
# where it would be made, every folder above it, every entry in it and the folder of each
# entry's link target must be root's alone.
check_slurm_bin() {
  local dir="$1" entry bad
  check_tree "--slurm-bin" "${dir}" "${dir}" "the first folder on the service's PATH" chain
  [[ -d "${dir}" ]] || return 0
  # A loop (/usr/bin/X11 -> .) makes find say so and fail; what it printed still counts.
  bad="$(find -L "${dir}" -mindepth 1 -maxdepth 1 ! -type l \( ! -user 0 -o -perm /022 \) \
         ! -type d -print -quit 2>/dev/null || true)"
  [[ -z "${bad}" ]] || die "--slurm-bin: '${dir}' is not safe for a service that runs as root: ${bad} is $(path_problem "$(readlink -f -- "${bad}")")"
  while IFS= read -r entry; do
    check_tree "--slurm-bin" "${dir}" "${entry:-/}" "the folder a link in ${dir} points into" \
      chain
  done < <(find "${dir}" -mindepth 1 -maxdepth 1 -type l -exec readlink -m -- {} + 2>/dev/null \
           | sed 's|/[^/]*$||' | sort -u)
}

main() {
  parse_common_args "$@"
  local hpcflow="${HPCFLOW_SPOT_HPCFLOW:-}" interval="${HPCFLOW_SPOT_INTERVAL_S:-5}"
  local endpoint="${HPCFLOW_SPOT_ENDPOINT:-http://169.254.169.254}" node="${HPCFLOW_SPOT_NODE:-}"
  local slurm_bin="${HPCFLOW_SPOT_SLURM_BIN:-}"
  set -- "${REST_ARGS[@]}"
  while (($#)); do
    case "$1" in
      --hpcflow) hpcflow="${2:?--hpcflow needs a path}"; shift 2 ;;
      --interval-s) interval="${2:?--interval-s needs a number}"; shift 2 ;;
      --endpoint) endpoint="${2:?--endpoint needs a URL}"; shift 2 ;;
      --node) node="${2:?--node needs a name}"; shift 2 ;;
      --slurm-bin) slurm_bin="${2:?--slurm-bin needs a directory}"; shift 2 ;;
      *) die "unknown argument '$1'; allowed: --hpcflow, --interval-s, --endpoint, --node, --slurm-bin" ;;
    esac
  done
  [[ "${interval}" =~ ^[0-9]+(\.[0-9]+)?$ ]] || die "--interval-s: '${interval}' is not a number of seconds"
  [[ "${endpoint}" =~ ^https?://[^[:space:]]+$ ]] || die "--endpoint: '${endpoint}' is not an http(s) URL"
  [[ "${node}" =~ ^[A-Za-z0-9._-]*$ ]] || die "--node: '${node}' is not a Slurm node name"
  if [[ -z "${hpcflow}" ]]; then
    hpcflow="$(command -v hpcflow || true)"
    [[ -n "${hpcflow}" ]] || die "hpcflow is not on PATH; install it on the node or give --hpcflow PATH"
  fi
  [[ "${hpcflow}" == /* && -x "${hpcflow}" ]] || die "--hpcflow: '${hpcflow}' is not an executable absolute path"
  [[ "${hpcflow}" =~ ^[A-Za-z0-9/._+-]+$ ]] || die "--hpcflow: '${hpcflow}' has characters a unit's ExecStart would misread"
  check_hpcflow "${hpcflow}"
  if [[ -z "${slurm_bin}" ]]; then
    slurm_bin="/opt/slurm/bin"
    if command -v squeue >/dev/null 2>&1; then slurm_bin="$(dirname "$(command -v squeue)")"; fi
  fi
  [[ "${slurm_bin}" == /* && "${slurm_bin}" =~ ^[A-Za-z0-9/._+-]+$ ]] || die "--slurm-bin: '${slurm_bin}' is not an absolute path of letters, digits and /._+-"
  check_slurm_bin "${slurm_bin}"
  local conf="${PREFIX}/etc/hpcflow/spot-watch.env" unit_dir="${PREFIX}/etc/systemd/system"
  local target="${unit_dir}/${UNIT}" want_env want_unit
  want_env="$(printf 'HPCFLOW_SPOT_ENDPOINT=%s\nHPCFLOW_SPOT_INTERVAL_S=%s\n' "${endpoint}" "${interval}")"
  [[ -z "${node}" ]] || want_env+=$'\n'"HPCFLOW_SPOT_NODE=${node}"
  want_env+=$'\n'"PATH=${slurm_bin}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
  # The unit names the env file by its path on the node (not the sandbox's).
  want_unit="$(unit_text "${hpcflow}" "/etc/hpcflow/spot-watch.env")"
  if [[ -f "${target}" && "$(cat "${target}")" == "${want_unit}" \
        && -f "${conf}" && "$(cat "${conf}")" == "${want_env}" ]]; then
    say "spot-watch: ${target} already installed, nothing to do"
    return 0
  fi
  if ((DRY_RUN)); then
    printf 'would install: %s and %s (ExecStart=%s spot-watch)\n' "${target}" "${conf}" "${hpcflow}"
    return 0
  fi
  mkdir -p "${unit_dir}" "$(dirname "${conf}")"
  printf '%s\n' "${want_env}" >"${conf}.tmp" && mv -f "${conf}.tmp" "${conf}"
  printf '%s\n' "${want_unit}" >"${target}.tmp" && mv -f "${target}.tmp" "${target}"
  if [[ -n "${PREFIX}" ]]; then
    run "${SYSTEMCTL}" --root="${PREFIX}" enable "${UNIT}"
    say "spot-watch: installed ${target} and enabled it under ${PREFIX} (not started: --prefix)"
  else
    run "${SYSTEMCTL}" daemon-reload
    run "${SYSTEMCTL}" enable "${UNIT}"
    run "${SYSTEMCTL}" restart "${UNIT}"
    say "spot-watch: installed, enabled and started ${UNIT}"
  fi
  mark_done spot-watch "installed"
}

if [[ "${BASH_SOURCE[0]}" == "${0}" ]]; then
  main "$@"
fi
