"""Doctor checks against a fake node (a Probe with canned command output and files)."""

from __future__ import annotations

import pytest

from hpcflow.doctor.checks import (
    check_efa,
    check_gpus,
    check_preempt_signal,
    check_preset,
    check_requeue,
    check_slurm,
    instance_type,
    library_versions,
    parse_slurm_config,
    run_all,
)
from hpcflow.doctor.probe import Output, Probe
from hpcflow.nccl.presets import Versions


class FakeProbe(Probe):
    def __init__(self, commands=None, files=None, env=None, dirs=None, mounts=(), writable=(),
                 imds=None):
        super().__init__(env=env or {})
        self.commands, self.files, self.dirs = commands or {}, files or {}, dirs or {}
        self.mounts, self.writable, self.imds = set(mounts), set(writable), imds

    def run(self, argv):
        return self.commands.get(" ".join(argv))

    def read(self, path):
        return self.files.get(path)

    def listdir(self, path):
        if path not in self.dirs:
            raise FileNotFoundError(path)
        return self.dirs[path]

    def glob(self, pattern):
        import fnmatch

        return sorted(p for d, names in self.dirs.items() for p in (f"{d}/{n}" for n in names)
                      if fnmatch.fnmatch(p, pattern))

    def interfaces(self):
        return ["lo", "ens32"]

    def is_mount(self, path):
        return path in self.mounts

    def writable_dir(self, path):
        return None if path in self.writable else "Permission denied"

    def instance_type(self):
        return self.imds


def _gpus(n):
    return Output(0, "".join(f"GPU {i}: NVIDIA H100 80GB HBM3 (UUID: GPU-{i})\n" for i in range(n)))


def _efa(n):
    return Output(0, "".join(f"provider: efa\n    fabric: efa\n    domain: rdmap{i}s0-rdm\n"
                             "    type: FI_EP_RDM\n" for i in range(n)))


@pytest.mark.parametrize(("n", "level"), [(8, "pass"), (7, "fail"), (0, "fail")])
def test_gpus_against_the_instance_type(n, level):
    result = check_gpus(FakeProbe({"nvidia-smi -L": _gpus(n)}), "p5.48xlarge")
    assert result.level == level
    if level == "fail":
        assert f"{n} of 8 GPUs for p5.48xlarge" in result.message and result.fix


def test_no_nvidia_smi_fails_where_gpus_are_expected_and_warns_otherwise():
    assert check_gpus(FakeProbe(), "p5.48xlarge").level == "fail"
    assert check_gpus(FakeProbe(), None).level == "warn"


@pytest.mark.parametrize(("n", "level"), [(32, "pass"), (31, "fail")])
def test_efa_against_the_instance_type(n, level):
    probe = FakeProbe({"fi_info -p efa -t FI_EP_RDM": _efa(n)})
    assert check_efa(probe, "p5.48xlarge").level == level


def test_instance_type_sources_in_order():
    assert instance_type(FakeProbe(imds="p4d.24xlarge"), "p5.48xlarge") == ("p5.48xlarge",
                                                                           "--instance-type")
    probe = FakeProbe(files={"/etc/hpcflow/health.env": "INSTANCE_TYPE=p5e.48xlarge\n"},
                      imds="p4d.24xlarge")
    assert instance_type(probe, None) == ("p5e.48xlarge", "/etc/hpcflow/health.env")
    assert instance_type(FakeProbe(imds="p4d.24xlarge"), None) == ("p4d.24xlarge",
                                                                   "instance metadata")
    assert instance_type(FakeProbe(), None) == (None, "nowhere")


def test_library_versions_from_the_efa_record_the_bootstrap_state_and_the_nccl_file():
    probe = FakeProbe(files={"/opt/amazon/efa_installed_packages": "# EFA installer version: 1.34.0\n",
                             "/var/lib/hpcflow/bootstrap/ofi-nccl.done": "1.17.3\n"},
                      dirs={"/opt/hpcflow/nccl/2.27.7-1/lib": ["libnccl.so.2.27.7", "libnccl.so"]})
    versions, lib = library_versions(probe)
    assert versions == Versions(ofi_nccl="1.17.3", nccl="2.27.7", efa_installer="1.34.0")
    assert lib == "/opt/hpcflow/nccl/2.27.7-1/lib/libnccl.so.2.27.7"


def test_preset_names_what_to_export_and_what_to_drop():
    v = Versions(ofi_nccl="1.17.3")
    missing = check_preset(FakeProbe(env={}), "p5.48xlarge", v)
    assert missing.level == "warn" and missing.fix == "export FI_EFA_USE_HUGE_PAGE=0"
    stale = check_preset(FakeProbe(env={"FI_EFA_USE_HUGE_PAGE": "0", "NCCL_PROTO": "simple",
                                        "NCCL_IB_HCA": "mlx5"}), "p5.48xlarge", v)
    assert stale.level == "warn" and stale.fix == "unset NCCL_PROTO NCCL_IB_HCA"
    good = check_preset(FakeProbe(env={"FI_EFA_USE_HUGE_PAGE": "0"}), "p5.48xlarge", v)
    assert good.level == "pass" and "FI_EFA_USE_HUGE_PAGE=0" in good.message


CONFIG = """\
Configuration data as of 2026-12-01T15:00:00
AuthInfo                = cred_expire=70
JobRequeue              = 1
PreemptMode             = REQUEUE
PreemptType             = preempt/partition_prio
SLURM_VERSION           = 23.11.10
"""


def test_slurm_reachable_and_config_read():
    probe = FakeProbe({"scontrol ping": Output(0, "Slurmctld(primary) at head is UP\n"),
                       "scontrol show config": Output(0, CONFIG)})
    result, config = check_slurm(probe)
    assert result.level == "pass" and "23.11.10" in result.message
    assert config["PreemptType"] == "preempt/partition_prio"


def test_slurm_down_or_missing_fails():
    down = FakeProbe({"scontrol ping": Output(1, "Slurmctld(primary) at head is DOWN\n")})
    assert check_slurm(down)[0].level == "fail"
    assert check_slurm(FakeProbe())[0].message == "scontrol not found"


def test_preemption_without_user_signal_warns_with_the_setting_to_add():
    config = parse_slurm_config(CONFIG)
    result = check_preempt_signal(config)
    assert result.level == "warn" and "PreemptParameters=send_user_signal" in result.fix
    assert "TERM at the start of GraceTime" in result.message
    config["PreemptParameters"] = "send_user_signal"
    assert check_preempt_signal(config).level == "pass"


@pytest.mark.parametrize(("version", "setting"), [
    pytest.param("22.05.8", "SlurmctldParameters=preempt_send_user_signal", id="22.05"),
    pytest.param("23.02.1", "PreemptParameters=send_user_signal", id="23.02"),
    pytest.param("25.11.8", "PreemptParameters=send_user_signal", id="25.11"),
])
def test_the_user_signal_option_is_spelled_for_the_slurm_found(version, setting):
    config = {"SLURM_VERSION": version, "PreemptType": "preempt/partition_prio"}
    assert setting in check_preempt_signal(config).fix
    config["SlurmctldParameters"] = "enable_configless,preempt_send_user_signal"
    result = check_preempt_signal(config)
    assert result.level == "pass" and setting in result.message


@pytest.mark.parametrize(("conf", "level", "text"), [
    ({"JobRequeue": "1", "AuthInfo": "cred_expire=70"}, "pass", "about 70 s"),
    ({"JobRequeue": "1"}, "pass", "about 120 s (Slurm's default cred_expire)"),
    ({"JobRequeue": "0"}, "warn", "never requeued"),
    ({"JobRequeue": "1", "AuthInfo": "cred_expire=600"}, "warn", "about 600 s"),
])
def test_requeue_and_its_delay(conf, level, text):
    result = check_requeue(conf)
    assert result.level == level and text in result.message


@pytest.mark.parametrize(("conf", "text"), [
    ({}, "up to 30 s for the next scheduling pass (SchedulerParameters bf_interval)"),
    ({"SchedulerType": "sched/builtin"},
     "up to 60 s for the next scheduling pass (SchedulerParameters sched_interval)"),
    ({"SchedulerParameters": "bf_interval=1,sched_interval=2"}, "up to 1 s for the next"),
    ({"SchedulerParameters": "sched_interval=5,bf_max_job_test=100"}, "up to 5 s for the next"),
])
def test_requeue_wait_includes_the_next_scheduling_pass(conf, text):
    result = check_requeue({"JobRequeue": "1", **conf})
    assert result.level == "pass" and text in result.message


def test_an_unreadable_scheduling_setting_leaves_the_pass_out():
    result = check_requeue({"JobRequeue": "1", "SchedulerParameters": "bf_interval=many"})
    assert result.message.endswith("about 120 s (Slurm's default cred_expire)")


def test_run_all_on_a_healthy_node():
    probe = FakeProbe(
        commands={"nvidia-smi -L": _gpus(8), "fi_info -p efa -t FI_EP_RDM": _efa(32),
                  "scontrol ping": Output(0, "Slurmctld(primary) at head is UP\n"),
                  "scontrol show config": Output(0, CONFIG + "PreemptParameters = send_user_signal\n")},
        files={"/opt/amazon/efa_installed_packages": "# EFA installer version: 1.34.0\n"},
        env={"LD_LIBRARY_PATH": "/opt/amazon/ofi-nccl/lib:/opt/hpcflow/nccl/2.27.7-1/lib",
             "FI_EFA_USE_HUGE_PAGE": "0", "NCCL_SOCKET_IFNAME": "ens"},
        dirs={"/opt/amazon/ofi-nccl/lib": ["libnccl-net.so"],
              "/opt/hpcflow/nccl/2.27.7-1/lib": ["libnccl.so.2.27.7"]},
        mounts={"/fsx"}, writable={"/fsx/ckpt"})
    results = run_all(probe, instance="p5.48xlarge", checkpoint_dir="/fsx/ckpt")
    assert [(r.name, r.level) for r in results if r.level != "pass"] == []
    assert len(results) == 12
