#!/usr/bin/env bash
# Install hpcflow and what it needs on a Debian/Ubuntu machine, as root.
#
# Usage: bash scripts/install.sh [--dev]
#   --dev   also install the test tools (OpenSSH server, ShellCheck; pytest, moto, ... extras)
# Installs Slurm and munge (for the local cluster) with apt-get when missing, creates a
# virtualenv, installs torch 2.13.0 (the CPU build) and hpcflow into it.
#
# Environment: HPCFLOW_VENV (default: .venv in the repository).
# Prints the virtualenv path on stdout; logs go to stderr. Exit 0 on success.
# Safe to rerun: what is installed is kept.
set -Eeuo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="${HPCFLOW_VENV:-${repo}/.venv}"
readonly repo venv
readonly TORCH_VERSION="2.13.0"   # pinned here, not in the package: a plain `torch` may pull a multi-GB CUDA build

log() { printf 'install: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

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
  bash "${repo}/hpcflow/local_cluster/apt-install.sh" "${missing[@]}"
}

install_python() {
  local extras="$1"
  if [[ ! -x "${venv}/bin/python" ]]; then
    log "creating ${venv}"
    python3 -m venv "${venv}"
  fi
  "${venv}/bin/python" -m pip install -q --upgrade pip >&2
  "${venv}/bin/python" -m pip install -q "torch==${TORCH_VERSION}" >&2
  "${venv}/bin/python" -m pip install -q -e "${repo}[${extras}]" >&2
}

main() {
  local dev=0
  case "${1:-}" in
    --dev) dev=1 ;;
    "") ;;
    *) die "unknown argument ${1}; usage: install.sh [--dev]" ;;
  esac
  install_system_packages "${dev}"
  if [[ "${dev}" == 1 ]]; then
    install_python "train,aws,ssh,hf,lightning,resilience,dev"
  else
    install_python "train"
  fi
  printf '%s\n' "${venv}"
}

if [[ "${BASH_SOURCE[0]}" == "${0}" ]]; then
  main "$@"
fi
