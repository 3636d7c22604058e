#!/usr/bin/env bash
# hpcflow's SageMaker HyperPod lifecycle entry script (LifeCycleConfig.OnCreate). HyperPod copies
# the bundle that `hpcflow cluster hyperpod create` uploads to every new node, this script
# beside hpcflow-bootstrap.sh, lib/, steps/ and prolog/, and runs it there as root.
#
# Usage: on_create.sh [--dry-run] [--prefix DIR] [--log-file FILE]
#   --prefix   a sandbox root: the resource config, fstab, the systemd drop-in and the steps'
#              installs are read and written under it (default: /)
#   --dry-run  print what would be done, change nothing
# In order:
#   1. this node's instance group: the resource config HyperPod writes on the node
#      (SAGEMAKER_RESOURCE_CONFIG_PATH, else PREFIX/opt/ml/config/resource_config.json) lists
#      each group (Name) with its instances' CustomerIpAddress; the node's own addresses are
#      `hostname -I` (or HPCFLOW_HYPERPOD_ADDRESSES, blank-separated);
#   2. its role: provisioning_parameters.json names the controller and login groups (any other
#      group is a worker), and hpcflow-hyperpod.json the group's steps and instance type;
#   3. the FSx for Lustre file system (fsx_dns_name, fsx_mountname) is mounted and kept in fstab;
#   4. hpcflow-bootstrap.sh runs the group's steps (none: skipped) with hpcflow-hyperpod.json's
#      step settings (--env NAME=VALUE);
#   5. Slurm: slurmctld on the controller (after slurm.conf appears, HPCFLOW_HYPERPOD_WAIT_S
#      seconds at most, default 120); slurmd on login and worker nodes, which fetches its
#      configuration from the controller (--conf-server, through a systemd drop-in).
# Environment: HPCFLOW_SYSTEMCTL (default systemctl), SLURM_CONF (default
#   PREFIX/opt/slurm/etc/slurm.conf), HPCFLOW_HYPERPOD_ADDRESSES, HPCFLOW_HYPERPOD_WAIT_S.
# Exit codes: 0 done; 1 a file is missing or malformed, this node is in no group, or a step
#   failed; 2 usage.
# Safe to rerun: a mounted file system, the fstab line and an identical drop-in are left alone,
#   and every bootstrap step is idempotent.
set -Eeuo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
STEP_NAME="hyperpod-on-create"
lib="${here}/lib/common.sh"
[[ -f "${lib}" ]] || lib="${here}/../lib/common.sh"  # the source tree's layout, for --help
# shellcheck source=bootstrap/lib/common.sh
source "${lib}"

readonly SYSTEMCTL="${HPCFLOW_SYSTEMCTL:-systemctl}"
readonly DROP_IN="etc/systemd/system/slurmd.service.d/hpcflow-conf-server.conf"

# node_facts RESOURCE_CONFIG PARAMS PLAN ADDRESSES: "key value" lines (group, role, partition,
# steps, instance_type, controllers, fsx_dns, fsx_mount, fsx_dir) for the group holding one of
# ADDRESSES, and one "env NAME=VALUE" per step setting; "error MESSAGE" when none does or a value has a control character.
node_facts() {
  python3 - "$@" <<'PY'
import json
import sys

rc_path, pp_path, plan_path, addresses = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4].split()


def load(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


resource, params, plan = load(rc_path), load(pp_path), load(plan_path)
controller, login = params.get("controller_group"), params.get("login_group")
mine, controllers = None, []
for group in resource.get("InstanceGroups") or []:
    for inst in group.get("Instances") or []:
        ip = inst.get("CustomerIpAddress")
        if group.get("Name") == controller and ip:
            controllers.append(ip)
        if mine is None and ip in addresses:
            mine = group.get("Name")
if mine is None:
    print(f"error this node ({' '.join(addresses) or 'no address'}) is in no group of {rc_path}")
    sys.exit(0)
own = (plan.get("groups") or {}).get(mine) or {}
role = "controller" if mine == controller else "login" if mine == login else "worker"
facts = {"group": mine, "role": role, "partition": own.get("partition") or "",
         "steps": ",".join(own.get("steps") or []), "instance_type": own.get("instance_type") or "",
         "controllers": ",".join(controllers), "fsx_dns": params.get("fsx_dns_name") or "",
         "fsx_mount": params.get("fsx_mountname") or "", "fsx_dir": plan.get("fsx_mount_dir") or ""}
lines = list(facts.items()) + [("env", f"{k}={v}") for k, v in (plan.get("env") or {}).items()]
for key, value in lines:
    value = str(value)
    if not value.isprintable() or " " in value:
        print(f"error {key} {value!r}: a blank or control character is not allowed")
        sys.exit(0)
    print(key, value)
PY
}

# mount_fsx DNS MOUNTNAME DIR: mount FSx for Lustre and add its fstab line (FSx for Lustre User
# Guide, "Mounting from an Amazon EC2 instance": mount -t lustre -o relatime,flock
# DNS@tcp:/MOUNTNAME DIR).
mount_fsx() {
  local source="$1@tcp:/$2" dir="${PREFIX}$3" fstab="${PREFIX}/etc/fstab" line
  line="${source} $3 lustre defaults,relatime,flock,_netdev 0 0"
  run mkdir -p "${dir}"
  if mountpoint -q "${dir}" 2>/dev/null; then
    say "fsx: ${dir} is mounted already"
  else
    run mount -t lustre -o relatime,flock "${source}" "${dir}"
  fi
  if [[ -f "${fstab}" ]] && grep -qxF "${line}" "${fstab}"; then
    return 0
  fi
  if ((DRY_RUN)); then
    printf 'would add to %s: %s\n' "${fstab}" "${line}"
  else
    mkdir -p "$(dirname "${fstab}")"
    printf '%s\n' "${line}" >>"${fstab}"
  fi
}

# wait_for_slurm_conf: HyperPod writes slurm.conf on the controller; slurmctld needs it.
wait_for_slurm_conf() {
  local conf="${SLURM_CONF:-${PREFIX}/opt/slurm/etc/slurm.conf}" left="${HPCFLOW_HYPERPOD_WAIT_S:-120}"
  ((DRY_RUN)) && return 0
  while [[ ! -f "${conf}" ]] && ((left > 0)); do
    sleep 5
    left=$((left - 5))
  done
  [[ -f "${conf}" ]] || warn "${conf} has not appeared; starting slurmctld anyway"
}

# start_slurm ROLE CONTROLLERS: slurmctld on the controller; elsewhere slurmd with --conf-server
# (slurmd(8); Slurm's own slurmd.service runs `slurmd -D -s $SLURMD_OPTIONS`, and systemd expands
# an Environment= value there, systemd.service(5) "Command lines").
start_slurm() {
  local role="$1" controllers="$2" unit text
  if [[ "${role}" == controller ]]; then
    wait_for_slurm_conf
    run "${SYSTEMCTL}" enable --now slurmctld
    return 0
  fi
  [[ -n "${controllers}" ]] || die "the resource config lists no instance of the controller group"
  unit="${PREFIX}/${DROP_IN}"
  text="$(printf '[Service]\nEnvironment="SLURMD_OPTIONS=--conf-server %s"' "${controllers}")"
  if [[ -f "${unit}" && "$(cat "${unit}")" == "${text}" ]]; then
    log "${unit} is in place"
  elif ((DRY_RUN)); then
    printf 'would write %s: SLURMD_OPTIONS=--conf-server %s\n' "${unit}" "${controllers}"
  else
    mkdir -p "$(dirname "${unit}")"
    printf '%s\n' "${text}" >"${unit}.tmp"
    mv -f "${unit}.tmp" "${unit}"
  fi
  run "${SYSTEMCTL}" daemon-reload
  run "${SYSTEMCTL}" enable --now slurmd
}

main() {
  case "${1:-}" in
    -h|--help) sed -n '2,28p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; return 0 ;;
  esac
  DIE_CODE=2
  parse_common_args "$@"
  ((${#REST_ARGS[@]} == 0)) || die "unknown argument '${REST_ARGS[0]}' (see --help)"
  DIE_CODE=1
  need_cmd python3
  local rc="${SAGEMAKER_RESOURCE_CONFIG_PATH:-${PREFIX}/opt/ml/config/resource_config.json}"
  local params="${here}/provisioning_parameters.json" plan="${here}/hpcflow-hyperpod.json" f
  for f in "${rc}" "${params}" "${plan}"; do
    [[ -r "${f}" ]] || die "${f} is missing or unreadable"
  done
  local addresses facts key value
  addresses="${HPCFLOW_HYPERPOD_ADDRESSES:-$(hostname -I 2>/dev/null || true)}"
  facts="$(node_facts "${rc}" "${params}" "${plan}" "${addresses}")" \
    || die "cannot read ${rc}, ${params} or ${plan} (see the Python error above)"
  local group="" role="" partition="" steps="" itype="" controllers="" dns="" mnt="" dir="" env=()
  while read -r key value; do
    case "${key}" in
      error) die "${value}" ;;
      group) group="${value}" ;;
      role) role="${value}" ;;
      partition) partition="${value}" ;;
      steps) steps="${value}" ;;
      instance_type) itype="${value}" ;;
      controllers) controllers="${value}" ;;
      fsx_dns) dns="${value}" ;;
      fsx_mount) mnt="${value}" ;;
      fsx_dir) dir="${value}" ;;
      env) env+=(--env "${value}") ;;
    esac
  done <<<"${facts}"
  say "node: group ${group}, role ${role}${partition:+, partition ${partition}}"
  if [[ -n "${dns}" && -n "${mnt}" ]]; then
    mount_fsx "${dns}" "${mnt}" "${dir:-/fsx}"
  fi
  if [[ -n "${steps}" ]]; then
    local args=(--steps "${steps}" --log-file "${LOG_FILE:-/dev/null}")
    [[ -z "${PREFIX}" ]] || args+=(--prefix "${PREFIX}")
    ((DRY_RUN == 0)) || args+=(--dry-run)
    [[ "${role}" != worker || -z "${itype}" ]] || args+=(--instance-type "${itype}")
    args+=("${env[@]}")
    bash "${here}/hpcflow-bootstrap.sh" "${args[@]}" || die "hpcflow-bootstrap.sh --steps ${steps} failed"
  else
    say "steps: none for group ${group}"
  fi
  start_slurm "${role}" "${controllers}"
  say "done: ${role} node of group ${group}"
}

if [[ "${BASH_SOURCE[0]}" == "${0}" ]]; then
  main "$@"
fi
