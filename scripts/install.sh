#!/usr/bin/env bash
# Install hpcflow and what it needs on a Debian/Ubuntu machine, as root.
#
# Usage: bash scripts/install.sh [--dev] [--torch index|cpu|cuda|skip] [--dry-run]
#   --dev      also install the test tools (OpenSSH server, ShellCheck; pytest, moto, ... extras)
#   --torch    which torch 2.13.0 build goes into the virtualenv:
#                index (default): `pip install torch==2.13.0` from pip's configured index, whatever
#                  build it serves. On the public index for Linux x86_64 that is the CUDA build,
#                  which pulls several GB of nvidia-* wheels; an index that serves the CPU build
#                  gives the CPU build. The build installed is logged.
#                cpu: from PyTorch's CPU wheel index (or HPCFLOW_TORCH_INDEX); fails unless the
#                  installed torch is a CPU build.
#                cuda: from HPCFLOW_TORCH_INDEX, else pip's configured index; fails unless the
#                  installed torch is a CUDA build.
#                skip: installs no torch; the virtualenv must already hold one (install the build
#                  you want first), else it fails before installing anything.
#   --dry-run  print each command it would run (one per line, shell-quoted, after "+ ") on stdout
#              and change nothing; the apt packages it lists are those missing now.
# Installs Slurm and munge (for the local cluster) with apt-get when missing, creates a
# virtualenv, installs torch 2.13.0 and hpcflow into it.
#
# Environment: HPCFLOW_VENV (default: .venv in the repository); HPCFLOW_TORCH_INDEX (an index URL
# for `--torch cpu|cuda`, passed to pip as --index-url).
# Prints the virtualenv path on stdout; logs go to stderr. Exit 0 on success, 2 on a bad
# argument, 1 on any other failure. Safe to rerun: what is installed is kept.
set -Eeuo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="${HPCFLOW_VENV:-${repo}/.venv}"
readonly repo venv
readonly TORCH_VERSION="2.13.0"   # pinned here, not in the package: a plain `torch` may pull a multi-GB CUDA build
# PyTorch's own index of CPU-only wheels (pytorch.org, "Get started": `--index-url .../whl/cpu`).
readonly TORCH_CPU_INDEX="https://download.pytorch.org/whl/cpu"
dry_run=0

log() { printf 'install: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }
usage_error() {
  log "error: $*"
  log "usage: install.sh [--dev] [--torch index|cpu|cuda|skip] [--dry-run]"
  exit 2
}

# Run a command, or with --dry-run print it (shell-quoted, after "+ ") on the script's stdout
# (fd 3, so that a caller's >&2 does not move it) instead.
run() {
  if ((dry_run)); then
    {
      printf '+'
      printf ' %q' "$@"
      printf '\n'
    } >&3
    return 0
  fi
  "$@"
}

install_system_packages() {
  local dev="$1" missing=()
  command -v slurmctld >/dev/null || [[ -x /usr/sbin/slurmctld ]] || missing+=(slurm-wlm)
  command -v munged >/dev/null || [[ -x /usr/sbin/munged ]] || missing+=(munge)
  python3 -m venv --help >/dev/null 2>&1 || missing+=(python3-venv)
  if [[ "${dev}" == 1 ]]; then
    [[ -x /usr/sbin/sshd ]] || missing+=(openssh-server)
    command -v shellcheck >/dev/null || missing+=(shellcheck)
  fi
  ((${#missing[@]})) || return 0
  log "installing ${missing[*]}"
  run bash "${repo}/hpcflow/local_cluster/apt-install.sh" "${missing[@]}" >&2
}

# The pip command that installs torch for one --torch choice ($1), on stdout as NUL-separated
# words; nothing for skip.
torch_pip_args() {
  local choice="$1" index="${HPCFLOW_TORCH_INDEX:-}"
  case "${choice}" in
    index) printf '%s\0' install -q "torch==${TORCH_VERSION}" ;;
    cpu) printf '%s\0' install -q --index-url "${index:-${TORCH_CPU_INDEX}}" "torch==${TORCH_VERSION}" ;;
    cuda)
      if [[ -n "${index}" ]]; then
        printf '%s\0' install -q --index-url "${index}" "torch==${TORCH_VERSION}"
      else
        printf '%s\0' install -q "torch==${TORCH_VERSION}"
      fi
      ;;
    skip) ;;
  esac
}

# Log the torch build in the virtualenv and check it against the --torch choice ($1).
check_torch() {
  local choice="$1" build
  local probe='import torch; print(torch.__version__, "cuda-" + torch.version.cuda if torch.version.cuda else "cpu")'
  if ((dry_run)); then
    run "${venv}/bin/python" -c "${probe}"
    return 0
  fi
  build="$("${venv}/bin/python" -c "${probe}" 2>/dev/null)" \
    || die "--torch ${choice}: no torch in ${venv}; install the build you want first (pip install torch==${TORCH_VERSION}), or use --torch index|cpu|cuda"
  log "torch ${build% *} (${build#* } build)"
  case "${choice}:${build#* }" in
    cpu:cpu | cuda:cuda-* | index:* | skip:*) ;;
    cpu:*) die "--torch cpu: ${venv} holds torch ${build% *}, a ${build#* } build; use a fresh HPCFLOW_VENV or pip uninstall torch first" ;;
    cuda:*) die "--torch cuda: the index served torch ${build% *}, a CPU build; set HPCFLOW_TORCH_INDEX to an index that serves CUDA builds, or pip uninstall torch first" ;;
  esac
}

install_python() {
  local extras="$1" torch="$2" args=()
  if [[ "${torch}" == skip ]]; then
    check_torch skip  # before anything is installed
  fi
  if [[ ! -x "${venv}/bin/python" ]]; then
    if ((dry_run)); then
      log "would create ${venv} (dry run: nothing is created)"
    else
      log "creating ${venv}"
    fi
    run python3 -m venv "${venv}"
  fi
  run "${venv}/bin/python" -m pip install -q --upgrade pip >&2
  mapfile -d '' -t args < <(torch_pip_args "${torch}")
  if ((${#args[@]})); then
    run "${venv}/bin/python" -m pip "${args[@]}" >&2
  fi
  # Before the extras: `train` requires torch, and pip would otherwise fetch the index's build.
  if [[ "${torch}" != skip ]]; then
    check_torch "${torch}"
  fi
  run "${venv}/bin/python" -m pip install -q -e "${repo}[${extras}]" >&2
  # An editable install leaves hpcflow's modules uncompiled, and where PYTHONDONTWRITEBYTECODE is
  # set every `python -m hpcflow...` (the CLI, the supervisor a batch script runs at each
  # decision) would compile them again; pip compiles the installed packages, this does the same.
  run "${venv}/bin/python" -m compileall -q "${repo}/hpcflow" >&2
}

main() {
  exec 3>&1
  local dev=0 torch=index
  while (($#)); do
    case "$1" in
      --dev) dev=1 ;;
      --dry-run) dry_run=1 ;;
      --torch)
        (($# >= 2)) || usage_error "--torch needs a value: index, cpu, cuda or skip"
        torch="$2"
        shift
        ;;
      --torch=*) torch="${1#--torch=}" ;;
      *) usage_error "unknown argument '$1'" ;;
    esac
    shift
  done
  case "${torch}" in
    index | cpu | cuda | skip) ;;
    *) usage_error "--torch: '${torch}' is not known; use index, cpu, cuda or skip" ;;
  esac
  install_system_packages "${dev}"
  if [[ "${dev}" == 1 ]]; then
    install_python "train,aws,ssh,hf,lightning,resilience,dev" "${torch}"
  else
    install_python "train" "${torch}"
  fi
  printf '%s\n' "${venv}"
}

if [[ "${BASH_SOURCE[0]}" == "${0}" ]]; then
  main "$@"
fi
