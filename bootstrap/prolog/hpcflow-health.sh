#!/usr/bin/env bash
# Slurm prolog health check: GPUs and EFA devices against the node's instance type.
#
# Installed by bootstrap step 90-healthcheck into ParallelCluster's prolog.d
# (/opt/slurm/etc/scripts/prolog.d/; ParallelCluster forbids setting Prolog itself). slurmd runs
# it as root before a job's first step on the node, with SLURMD_NODENAME set. A node whose GPU
# count (nvidia-smi -L) or EFA device count (fi_info -p efa -t FI_EP_RDM, distinct domains) is
# below the figures for its instance type is drained with a reason, and the prolog fails so Slurm
# requeues the job elsewhere instead of running it on a broken node.
#
# Usage: hpcflow-health.sh [--dry-run] [--node NAME] [--instance-type TYPE]
# Environment: SLURMD_NODENAME (the node to drain), HPCFLOW_INSTANCE_TYPE, HPCFLOW_HEALTH_CONF
#   (default /etc/hpcflow/health.env: INSTANCE_TYPE=..., EXPECT_GPUS=..., EXPECT_EFA=...),
#   HPCFLOW_HEALTH_LOG (default /var/log/hpcflow-health.log), HPCFLOW_SCONTROL (scontrol path),
#   HPCFLOW_IMDS_ENDPOINT (default http://169.254.169.254).
# Exit codes: 0 healthy, or an instance type with no known figures (warned); 1 unhealthy (drained).
# Safe to rerun: it only reads, and drains a node that is already failing.
#
# Expected figures: hpcflow's instance table (hpcflow/pcluster/catalog.py: EC2
# DescribeInstanceTypes GpuInfo.Gpus[].Count and NetworkInfo.EfaInfo.MaximumEfaInterfaces);
# a unit test keeps this table equal to it. Trainium counts no GPUs (Neuron devices are not
# checked here).
set -Eeuo pipefail

readonly CONF="${HPCFLOW_HEALTH_CONF:-/etc/hpcflow/health.env}"
# slurmd runs prologs with a minimal PATH: add where the EFA installer and ParallelCluster put
# fi_info and scontrol.
PATH="${PATH:-/usr/bin:/bin}:/usr/bin:/bin:/opt/amazon/efa/bin:/opt/slurm/bin"
readonly LOG="${HPCFLOW_HEALTH_LOG:-/var/log/hpcflow-health.log}"
# The instance metadata service (EC2 User Guide, IMDSv2); another URL only for tests.
readonly IMDS="${HPCFLOW_IMDS_ENDPOINT:-http://169.254.169.254}"

log() {
  local line
  line="$(date -u '+%Y-%m-%dT%H:%M:%SZ') hpcflow-health[${NODE:-?}]: $*"
  printf '%s\n' "${line}" >&2
  printf '%s\n' "${line}" >>"${LOG}" 2>/dev/null || true
}

# expected_for TYPE: "GPUS EFA" for a known instance type, nothing otherwise.
expected_for() {
  case "$1" in
    p4d.24xlarge) echo "8 4" ;;
    p4de.24xlarge) echo "8 4" ;;
    p5.4xlarge) echo "1 1" ;;
    p5.48xlarge) echo "8 32" ;;
    p5e.48xlarge) echo "8 32" ;;
    p5en.48xlarge) echo "8 16" ;;
    p6-b200.48xlarge) echo "8 8" ;;
    g5.xlarge) echo "1 0" ;;
    g5.2xlarge) echo "1 0" ;;
    g5.4xlarge) echo "1 0" ;;
    g5.8xlarge) echo "1 1" ;;
    g5.12xlarge) echo "4 1" ;;
    g5.16xlarge) echo "1 1" ;;
    g5.24xlarge) echo "4 1" ;;
    g5.48xlarge) echo "8 1" ;;
    g6.xlarge) echo "1 0" ;;
    g6.2xlarge) echo "1 0" ;;
    g6.4xlarge) echo "1 0" ;;
    g6.8xlarge) echo "1 1" ;;
    g6.12xlarge) echo "4 1" ;;
    g6.16xlarge) echo "1 1" ;;
    g6.24xlarge) echo "4 1" ;;
    g6.48xlarge) echo "8 1" ;;
    g6e.xlarge) echo "1 0" ;;
    g6e.2xlarge) echo "1 0" ;;
    g6e.4xlarge) echo "1 0" ;;
    g6e.8xlarge) echo "1 1" ;;
    g6e.12xlarge) echo "4 1" ;;
    g6e.16xlarge) echo "1 1" ;;
    g6e.24xlarge) echo "4 2" ;;
    g6e.48xlarge) echo "8 4" ;;
    trn1.2xlarge) echo "0 0" ;;
    trn1.32xlarge) echo "0 8" ;;
    trn1n.32xlarge) echo "0 16" ;;
    trn2.3xlarge) echo "0 1" ;;
    trn2.48xlarge) echo "0 16" ;;
    *) ;;
  esac
}

gpu_count() {
  command -v nvidia-smi >/dev/null 2>&1 || { echo 0; return 0; }
  local out
  out="$(nvidia-smi -L 2>/dev/null)" || { echo 0; return 0; }
  grep -c '^GPU [0-9]' <<<"${out}" || true
}

efa_count() {
  command -v fi_info >/dev/null 2>&1 || { echo 0; return 0; }
  local out
  out="$(fi_info -p efa -t FI_EP_RDM 2>/dev/null)" || { echo 0; return 0; }
  sed -n 's/^[[:space:]]*domain:[[:space:]]*\([^[:space:]]*\).*/\1/p' <<<"${out}" | sort -u | grep -c . || true
}

# imds_instance_type: the instance type from IMDSv2, or nothing. Never through a proxy
# (--noproxy '*'), and the token never on a command line, where ps(1) shows it to every user:
# curl reads that header from a config on stdin (curl(1), --config "-"), and printf is a shell
# builtin.
imds_instance_type() {
  command -v curl >/dev/null 2>&1 || return 0
  local token
  token="$(curl -fsS -m 2 --noproxy '*' -X PUT "${IMDS}/latest/api/token" \
    -H 'X-aws-ec2-metadata-token-ttl-seconds: 60' 2>/dev/null)" || return 0
  [[ "${token}" =~ ^[A-Za-z0-9+/=_-]+$ ]] || return 0
  printf 'header = "X-aws-ec2-metadata-token: %s"\n' "${token}" \
    | curl -fsS -m 2 --noproxy '*' --config - "${IMDS}/latest/meta-data/instance-type" \
      2>/dev/null || true
}

drain() {
  local reason="$1" scontrol="${HPCFLOW_SCONTROL:-}"
  if ((DRY_RUN)); then
    printf 'would drain %s: %s\n' "${NODE}" "${reason}"
    return 0
  fi
  [[ -n "${scontrol}" ]] || scontrol="$(command -v scontrol || echo /opt/slurm/bin/scontrol)"
  log "draining ${NODE}: ${reason}"
  "${scontrol}" update NodeName="${NODE}" State=DRAIN Reason="${reason}" \
    || log "error: could not drain ${NODE} with ${scontrol}"
}

main() {
  DRY_RUN=0
  NODE="${SLURMD_NODENAME:-$(hostname -s)}"
  local itype="${HPCFLOW_INSTANCE_TYPE:-}" INSTANCE_TYPE="" EXPECT_GPUS="" EXPECT_EFA=""
  while (($#)); do
    case "$1" in
      --dry-run) DRY_RUN=1; shift ;;
      --node) NODE="${2:?--node needs a name}"; shift 2 ;;
      --instance-type) itype="${2:?--instance-type needs a type}"; shift 2 ;;
      *) log "error: unknown argument $1"; return 2 ;;
    esac
  done
  if [[ -f "${CONF}" ]]; then
    # shellcheck disable=SC1090  # written by bootstrap step 90-healthcheck
    source "${CONF}"
  fi
  itype="${itype:-${INSTANCE_TYPE:-$(imds_instance_type)}}"
  local figures want_gpus want_efa
  figures="$(expected_for "${itype}")"
  want_gpus="${EXPECT_GPUS:-${figures% *}}"
  want_efa="${EXPECT_EFA:-${figures#* }}"
  if [[ -z "${want_gpus}" || -z "${want_efa}" ]]; then
    log "warning: no expected figures for instance type '${itype:-unknown}'; set EXPECT_GPUS and EXPECT_EFA in ${CONF}"
    return 0
  fi
  local gpus efa problems=()
  gpus="$(gpu_count)"
  efa="$(efa_count)"
  ((gpus >= want_gpus)) || problems+=("GPUs ${gpus}/${want_gpus}")
  ((efa >= want_efa)) || problems+=("EFA ${efa}/${want_efa}")
  if ((${#problems[@]} == 0)); then
    log "ok: ${itype}: ${gpus} GPUs, ${efa} EFA devices"
    return 0
  fi
  drain "hpcflow-health ${itype}: ${problems[*]}"
  return 1
}

if [[ "${BASH_SOURCE[0]}" == "${0}" ]]; then
  main "$@"
fi
