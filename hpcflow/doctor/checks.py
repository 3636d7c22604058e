"""The node checks behind ``hpcflow doctor``; each returns pass/warn/fail with the fix.

Every check takes a :class:`~hpcflow.doctor.probe.Probe` (or text it produced) and never raises
for what it finds on the node: a missing tool is a warn or fail line, not an exception.

Sources:
- Expected GPUs and EFA interfaces: hpcflow's instance table (``hpcflow.pcluster.catalog``,
  EC2 DescribeInstanceTypes).
- The user-signal option of preemption: without it a preempted job's steps get TERM at the
  start of ``GraceTime`` and the batch shell gets nothing (seen on the local cluster, Slurm
  22.05.8); with it the batch shell also gets the job's ``--signal`` then. Its spelling depends
  on the version: ``SlurmctldParameters=preempt_send_user_signal`` in 22.05 (slurm.conf(5) of
  22.05; ``PreemptParameters`` is unknown there and every client then fails with "Parsing error
  at unrecognized key"), ``PreemptParameters=send_user_signal`` from 23.02 on.
- ``JobRequeue``: slurm.conf(5), the default for jobs without ``--requeue``/``--no-requeue``.
- Requeue delay: a requeued job cannot start again until its credential expires,
  ``AuthInfo=cred_expire`` (slurm.conf(5), default 120 s); ParallelCluster sets 70 s for that
  reason (aws-parallelcluster-cookbook CHANGELOG 3.2.0: "Set Slurm configuration
  AuthInfo=cred_expire=70 to reduce the time requeued jobs must wait before starting again when
  nodes are not available").
- It then starts at the next scheduling pass: the main scheduler runs every ``sched_interval``
  (default 60 s) and, with ``SchedulerType=sched/backfill``, the backfill scheduler every
  ``bf_interval`` (default 30 s) (slurm.conf(5), SchedulerParameters).
"""

from __future__ import annotations

import re

from hpcflow.check_result import CheckResult, fail, ok, warn
from hpcflow.doctor.hyperpod import check_hyperpod
from hpcflow.doctor.hyperpod_checks import hyperpod_node_checks
from hpcflow.doctor.probe import Probe
from hpcflow.nccl.checks import check_plugin_path, check_socket_ifname, loader_conf_dirs
from hpcflow.nccl.presets import Versions, contradicting_settings, node_facts, preset_env

_HEALTH_ENV = "/etc/hpcflow/health.env"
_EFA_PACKAGES = "/opt/amazon/efa_installed_packages"
_OFI_DONE = "/var/lib/hpcflow/bootstrap/ofi-nccl.done"
_NCCL_GLOBS = ("/opt/hpcflow/nccl/*/lib/libnccl.so.*", "/usr/lib/x86_64-linux-gnu/libnccl.so.*",
               "/usr/lib64/libnccl.so.*", "/usr/local/cuda/lib64/libnccl.so.*")
_LEGACY = {"FI_PROVIDER", "NCCL_PROTO", "FI_EFA_USE_DEVICE_RDMA"}


def parse_slurm_config(text: str) -> dict[str, str]:
    """``scontrol show config`` -> ``{"JobRequeue": "1", ...}``."""
    out = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep and key.strip() and " " not in key.strip():
            out[key.strip()] = value.strip()
    return out


def instance_type(probe: Probe, given: str | None) -> tuple[str | None, str]:
    """The instance type and where it came from: --instance-type, HPCFLOW_INSTANCE_TYPE, the
    health check's settings (bootstrap step 90), then the instance metadata service."""
    if given:
        return given, "--instance-type"
    if probe.env.get("HPCFLOW_INSTANCE_TYPE"):
        return probe.env["HPCFLOW_INSTANCE_TYPE"], "HPCFLOW_INSTANCE_TYPE"
    m = re.search(r"^INSTANCE_TYPE=['\"]?([\w.-]+)", probe.read(_HEALTH_ENV) or "", re.M)
    if m:
        return m.group(1), _HEALTH_ENV
    found = probe.instance_type()
    return found, ("instance metadata" if found else "nowhere")


def _facts(itype: str | None):  # noqa: ANN202
    from hpcflow.pcluster.catalog import Catalog

    return Catalog.offline().get(itype) if itype else None


def check_instance(itype: str | None, where: str) -> CheckResult:
    if not itype:
        return warn("instance", "instance type unknown (no instance metadata: not on EC2?)",
                    "pass --instance-type, e.g. --instance-type p5.48xlarge")
    if _facts(itype) is None:
        from hpcflow.pcluster.catalog import Catalog, instance_type_problem

        problem = instance_type_problem(itype, Catalog.offline(), "its GPU and EFA counts")
        return warn("instance", f"{itype} (from {where}): {problem}: the GPU and EFA checks "
                    "cannot run",
                    "pass --instance-type with a type hpcflow has facts for "
                    "(hpcflow cluster instances lists them)")
    return ok("instance", f"{itype} (from {where})")


def check_gpus(probe: Probe, itype: str | None) -> CheckResult:
    facts = _facts(itype)
    want = facts.accelerator_count if facts and not facts.accelerator.startswith("Trainium") else None
    out = probe.run(["nvidia-smi", "-L"])
    if out is None:
        level = fail if want else warn
        return level("gpus", "nvidia-smi not found: no NVIDIA driver on this node",
                     "install the NVIDIA driver (ParallelCluster AMIs ship it)")
    if out.returncode != 0:
        return fail("gpus", f"nvidia-smi -L failed (exit {out.returncode}): {_tail(out.text)}",
                    "check the driver: dmesg | grep -i nvrm; reboot or replace the node")
    have = len(re.findall(r"^GPU \d+:", out.text, re.M))
    if want is None:
        return warn("gpus", f"{have} GPUs; expected count unknown", "pass --instance-type")
    if have < want:
        return fail("gpus", f"{have} of {want} GPUs for {itype}",
                    "drain and replace the node (the prolog health check does this)")
    return ok("gpus", f"{have} GPUs ({itype}: {want})")


def check_efa(probe: Probe, itype: str | None) -> CheckResult:
    facts = _facts(itype)
    want = facts.max_efa_interfaces if facts else None
    out = probe.run(["fi_info", "-p", "efa", "-t", "FI_EP_RDM"])
    if out is None:
        level = fail if want else warn
        return level("efa", "fi_info not found: the EFA software is not installed",
                     "run bootstrap step efa (hpcflow bootstrap --steps efa)")
    have = len(set(re.findall(r"^\s*domain:\s*(\S+)", out.text, re.M))) if out.returncode == 0 else 0
    if want is None:
        return warn("efa", f"{have} EFA devices; expected count unknown", "pass --instance-type")
    if have < want:
        return fail("efa", f"{have} of {want} EFA devices for {itype}",
                    "check Efa.Enabled on the compute resource and `fi_info -p efa`; replace the node")
    return ok("efa", f"{have} EFA devices ({itype}: {want})" if want else "no EFA expected")


def library_versions(probe: Probe) -> tuple[Versions, str | None]:
    """Installed aws-ofi-nccl / NCCL / EFA installer versions, and the NCCL library found."""
    efa = re.search(r"EFA installer version:\s*([\d.]+)", probe.read(_EFA_PACKAGES) or "")
    ofi = (probe.read(_OFI_DONE) or "").strip() or None
    if ofi is None:
        m = re.search(r"(?:aws-ofi-nccl|libnccl-ofi)\S*?[-_ ]v?(\d+\.\d+\.\d+)",
                      probe.read(_EFA_PACKAGES) or "")
        ofi = m.group(1) if m else None
    libs = [f"{d}/libnccl.so.*" for d in probe.env.get("LD_LIBRARY_PATH", "").split(":") if d]
    nccl_lib = nccl = None
    for pattern in (*libs, *_NCCL_GLOBS):
        for path in probe.glob(pattern):
            m = re.search(r"libnccl\.so\.(\d+\.\d+\.\d+)$", path)
            if m:
                nccl_lib, nccl = path, m.group(1)
                break
        if nccl:
            break
    return Versions(ofi_nccl=ofi, nccl=nccl, efa_installer=efa.group(1) if efa else None), nccl_lib


def check_nccl(versions: Versions, lib: str | None) -> CheckResult:
    if not lib:
        return warn("nccl", "no libnccl.so.<version> on LD_LIBRARY_PATH or in the usual places "
                    "(PyTorch wheels bring their own)", "run bootstrap step nccl, or rely on "
                    "the NCCL inside your PyTorch build")
    return ok("nccl", f"NCCL {versions.nccl} ({lib})")


def check_plugin(probe: Probe, versions: Versions, itype: str | None = None) -> CheckResult:
    """Where NCCL's loader finds the net plugin: LD_LIBRARY_PATH, then ld.so.conf.d."""
    node = node_facts(itype) if itype else None
    result = check_plugin_path(probe.env, probe.listdir, loader_conf_dirs(probe.read, probe.glob),
                               efa_expected=node.efa_gpu if node else None)
    if result.level == "pass":
        ver = versions.ofi_nccl or "version unknown"
        return ok(result.name, f"{result.message} (aws-ofi-nccl {ver})")
    return result


def check_preset(probe: Probe, itype: str | None, versions: Versions) -> CheckResult:
    """The preset in force, settings that contradict it (with their source), and legacy values
    no longer needed; no verdict on versions when the aws-ofi-nccl version is unknown."""
    if not itype:
        return warn("env-preset", "instance type unknown: no preset chosen", "pass --instance-type")
    preset = preset_env(itype, versions)
    env = probe.env
    missing = {k: v for k, v in preset.env.items() if env.get(k) != v}
    contradictions = contradicting_settings(env, node_facts(itype))
    legacy = sorted(k for k in _LEGACY if k in env and k not in preset.env)
    known = versions.ofi_nccl is not None
    stale = legacy if known else []
    ib = sorted(k for k in env if k.startswith("NCCL_IB_"))
    notes = list(preset.notes)
    if legacy and not known:
        notes.append(f"{', '.join(legacy)} set; whether they are needed depends on the "
                     "aws-ofi-nccl version, which is unknown")
    shown_notes = "; ".join(notes)
    if missing:
        return warn("env-preset", f"preset for {itype} not in force: "
                    + ", ".join(f"{k}={env.get(k, '<unset>')}" for k in missing),
                    "export " + " ".join(f"{k}={v}" for k, v in missing.items()))
    if contradictions:
        return warn("env-preset", "settings that work against NCCL over EFA on "
                    f"{itype}: " + "; ".join(c.line() for c in contradictions),
                    "unset " + " ".join(c.name for c in contradictions))
    if stale or ib:
        return warn("env-preset", f"set but not needed with these versions: {', '.join(stale + ib)}"
                    + (" (NCCL_IB_* are for InfiniBand, not EFA)" if ib else ""),
                    "unset " + " ".join(stale + ib))
    shown = ", ".join(f"{k}={v}" for k, v in preset.env.items()) or "nothing to set"
    return ok("env-preset", f"{itype}: {shown}" + (f" ({shown_notes})" if shown_notes else ""))


def check_ifname(probe: Probe) -> CheckResult:
    return check_socket_ifname(probe.env, probe.interfaces())


def check_slurm(probe: Probe) -> tuple[CheckResult, dict[str, str]]:
    """Slurm reachable (``scontrol ping``), and its configuration for the next checks."""
    ping = probe.run(["scontrol", "ping"])
    if ping is None:
        return fail("slurm", "scontrol not found", "install Slurm's client or put it on PATH "
                    "(ParallelCluster: /opt/slurm/bin)"), {}
    if ping.returncode != 0 or "UP" not in ping.text:
        return fail("slurm", f"slurmctld not reachable: {_tail(ping.text)}",
                    "check slurm.conf's SlurmctldHost and that slurmctld runs"), {}
    conf = probe.run(["scontrol", "show", "config"])
    config = parse_slurm_config(conf.text) if conf and conf.returncode == 0 else {}
    version = config.get("SLURM_VERSION", "?")
    return ok("slurm", f"{_tail(ping.text)} (Slurm {version})"), config


def user_signal_setting(version: str) -> str:
    """The slurm.conf line that makes Slurm send a preempted job its ``--signal``, for Slurm
    ``version`` (``"22.05.8"``), from :mod:`hpcflow.slurm.versions`'s table (its sources). An
    unreadable version gets the current spelling."""
    from hpcflow.slurm.versions import keys_for, parse_version

    return keys_for(parse_version(version)).user_signal


def check_preempt_signal(config: dict[str, str]) -> CheckResult:
    if not config:
        return warn("preempt-signal", "Slurm configuration unknown", "fix the slurm check first")
    ptype = config.get("PreemptType", "preempt/none")
    params = ",".join((config.get("PreemptParameters", ""), config.get("SlurmctldParameters", "")))
    setting = user_signal_setting(config.get("SLURM_VERSION", ""))
    if "send_user_signal" in params:
        return ok("preempt-signal", f"{setting}: a preempted job's batch shell gets its --signal "
                  "(USR1) at the start of GraceTime, as well as TERM to its steps")
    if ptype in ("preempt/none", "(null)"):
        return ok("preempt-signal", "no job preemption configured (PreemptType=preempt/none); "
                  "spot and time-limit warnings still arrive as USR1")
    return warn("preempt-signal", f"PreemptType={ptype} without {setting}: a preempted job's "
                "steps get TERM at the start of GraceTime and its batch shell gets no signal. "
                "hpcflow's ranks take TERM as the warning and hpcflow requeues the job, but a "
                "program that does not join the protocol gets no timed stop",
                f"add {setting} to slurm.conf (ParallelCluster: "
                "Scheduling.SlurmSettings.CustomSlurmSettings)")


def scheduling_pass_s(config: dict[str, str]) -> tuple[int, str]:
    """Longest wait, in seconds, for Slurm's next scheduling pass, and the setting that sets it.

    Args:
        config: ``scontrol show config`` as a mapping (see :func:`parse_slurm_config`).
    """
    params = dict(p.partition("=")[::2] for p in config.get("SchedulerParameters", "").split(",")
                  if "=" in p)
    passes = [(int(params.get("sched_interval", "60")), "sched_interval")]
    if config.get("SchedulerType", "sched/backfill") == "sched/backfill":
        passes.append((int(params.get("bf_interval", "30")), "bf_interval"))
    return min(passes)


def check_requeue(config: dict[str, str]) -> CheckResult:
    if not config:
        return warn("requeue", "Slurm configuration unknown", "fix the slurm check first")
    m = re.search(r"cred_expire=(\d+)", config.get("AuthInfo", ""))
    delay_s = int(m.group(1)) if m else 120
    where = "AuthInfo cred_expire" if m else "Slurm's default cred_expire"
    try:
        pass_s, setting = scheduling_pass_s(config)
        then = f", then up to {pass_s} s for the next scheduling pass (SchedulerParameters {setting})"
    except ValueError:
        then = ""
    text = (f"JobRequeue={config.get('JobRequeue', '?')}; a requeued job waits about {delay_s} s "
            f"({where}){then}{_expedite_note(config)}")
    if config.get("JobRequeue") != "1":
        return warn("requeue", text + ": jobs without --requeue are never requeued",
                    "hpcflow's sbatch scripts pass --requeue; for other jobs set JobRequeue=1")
    if delay_s > 120:
        return warn("requeue", text, "lower it: AuthInfo=cred_expire=70 (ParallelCluster's value)")
    return ok("requeue", text)


def _expedite_note(config: dict[str, str]) -> str:
    """On a Slurm with expedited requeue (25.11 on, :mod:`hpcflow.slurm.versions`): whether the
    cluster allows it; nothing on older versions or when the version is unknown."""
    from hpcflow.slurm.versions import keys_for, parse_version

    version = parse_version(config.get("SLURM_VERSION"))
    keys = keys_for(version)
    if version is None or keys.expedite_setting is None:
        return ""
    if "enable_expedited_requeue" in config.get("SlurmctldParameters", ""):
        return (f"; expedited requeue allowed ({keys.expedite_setting}): a job submitted with "
                f"{keys.expedite_requeue} may start again at once")
    return (f"; expedited requeue ({keys.expedite_requeue}, Slurm 25.11) is off: "
            f"{keys.expedite_setting} allows it")


def check_shared_fs(probe: Probe, shared_dir: str, checkpoint_dir: str | None) -> list[CheckResult]:
    results = []
    if probe.is_mount(shared_dir):
        results.append(ok("shared-fs", f"{shared_dir} is mounted"))
    else:
        results.append(fail("shared-fs", f"{shared_dir} is not a mount point",
                            "mount the shared file system (SharedStorage in the cluster config) "
                            "or pass --shared-dir"))
    target = checkpoint_dir or shared_dir
    reason = probe.writable_dir(target)
    if reason is None:
        results.append(ok("checkpoint-dir", f"{target} is writable"))
    elif target == shared_dir and not probe.is_mount(shared_dir):
        # mkdir here would put checkpoints on the node's own disk, where other nodes never see
        # them and they die with the node.
        results.append(fail("checkpoint-dir", f"{target} is not writable: {reason}",
                            "mount the shared file system first (see shared-fs); do not create "
                            f"{target} on the node's own disk"))
    else:
        results.append(fail("checkpoint-dir", f"{target} is not writable: {reason}",
                            f"create it on the shared file system and give your user write "
                            f"access (mkdir -p {target})"))
    return results


def run_all(probe: Probe, *, instance: str | None = None, shared_dir: str = "/fsx",
            checkpoint_dir: str | None = None, root: str = "/") -> list[CheckResult]:
    """Every check, in the order ``hpcflow doctor`` prints them; the ``hyperpod`` line first,
    then the HyperPod node's own (:mod:`hpcflow.doctor.hyperpod_checks`, files read under
    ``root``), on a SageMaker HyperPod node only
    (:func:`hpcflow.doctor.hyperpod.check_hyperpod`)."""
    itype, where = instance_type(probe, instance)
    versions, lib = library_versions(probe)
    slurm, config = check_slurm(probe)
    hyperpod = check_hyperpod(probe)
    own = hyperpod_node_checks(probe, root) if hyperpod else []
    return [*([hyperpod] if hyperpod else []), *own, check_instance(itype, where),
            check_gpus(probe, itype), check_efa(probe, itype),
            check_nccl(versions, lib), check_plugin(probe, versions, itype),
            check_preset(probe, itype, versions), check_ifname(probe), slurm,
            check_preempt_signal(config), check_requeue(config),
            *check_shared_fs(probe, shared_dir, checkpoint_dir)]


def _tail(text: str) -> str:
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    return lines[-1] if lines else "(no output)"
