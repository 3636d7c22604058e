"""The Slurm versions users run (22.05 to 25.11): one table from the version to the keys that
differ, each with its source, read from `slurmctld -V` / `scontrol --version` output; the local
cluster's slurm.conf and `hpcflow doctor` take their keys from it."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from hpcflow.doctor.checks import check_requeue, user_signal_setting
from hpcflow.local_cluster.config import LocalClusterConfig, render_slurm_conf
from hpcflow.local_cluster.system import installed_slurm_version
from hpcflow.slurm.versions import TABLE, SlurmKeys, keys_for, parse_version

OLD_SIGNAL = "SlurmctldParameters=preempt_send_user_signal"
NEW_SIGNAL = "PreemptParameters=send_user_signal"
EXPEDITE = "SlurmctldParameters=enable_expedited_requeue"


@pytest.mark.parametrize("text, version", [
    pytest.param("slurm-wlm 22.05.8\n", (22, 5, 8), id="debian-12"),
    pytest.param("slurm 24.11.5", (24, 11, 5), id="debian-13"),
    pytest.param("slurm 25.11.8\n", (25, 11, 8), id="parallelcluster-3.16.1"),
    pytest.param("25.11.0-0rc1", (25, 11, 0), id="pre-release"),
    pytest.param("23.02", (23, 2, 0), id="two-parts"),
    pytest.param("", None, id="empty"),
    pytest.param("slurmctld: command not found", None, id="no-version"),
])
def test_the_version_is_read_from_the_commands_output(text, version):
    assert parse_version(text) == version


# version, user-signal line, CgroupAutomount allowed, cgroup/v1 deprecated, expedited requeue
ROWS = [
    pytest.param((22, 5, 8), OLD_SIGNAL, True, False, None, id="22.05"),
    pytest.param((23, 2, 7), NEW_SIGNAL, True, False, None, id="23.02"),
    pytest.param((23, 11, 10), NEW_SIGNAL, False, False, None, id="23.11"),
    pytest.param((24, 5, 8), NEW_SIGNAL, False, False, None, id="24.05"),
    pytest.param((24, 11, 5), NEW_SIGNAL, False, False, None, id="24.11"),
    pytest.param((25, 5, 3), NEW_SIGNAL, False, True, None, id="25.05"),
    pytest.param((25, 11, 8), NEW_SIGNAL, False, True, "--requeue=expedite", id="25.11"),
]


@pytest.mark.parametrize("version, signal, automount, v1_deprecated, expedite", ROWS)
def test_the_keys_of_each_version(version, signal, automount, v1_deprecated, expedite):
    keys = keys_for(version)
    assert keys.user_signal == signal
    assert (keys.proctrack, keys.task_plugin) == ("proctrack/linuxproc", "task/none")
    assert keys.cgroup_automount is automount and keys.cgroup_v1_deprecated is v1_deprecated
    assert keys.expedite_requeue == expedite
    assert keys.expedite_setting == (EXPEDITE if expedite else None)
    assert user_signal_setting(".".join(map(str, version))) == signal


def test_every_key_of_every_row_has_a_source():
    fields = [f for f in SlurmKeys.__dataclass_fields__ if f not in ("since", "sources")]
    for row in TABLE:
        assert sorted(row.sources) == sorted(fields), row.since
        assert all(("(5)" in s or "(1)" in s or "RELEASE_NOTES" in s) for s in row.sources.values())
    assert [row.since for row in TABLE] == sorted(row.since for row in TABLE)


def test_versions_outside_the_table():
    assert keys_for((21, 8, 8)).user_signal == OLD_SIGNAL  # older: the first row
    assert keys_for((26, 5, 0)) == TABLE[-1]  # newer: the last row
    assert keys_for(None).user_signal == NEW_SIGNAL  # unreadable: what Slurm documents now


@pytest.mark.parametrize("version, signal, automount, v1_deprecated, expedite", ROWS)
def test_the_local_clusters_slurm_conf_for_each_version(version, signal, automount,
                                                       v1_deprecated, expedite):
    today = render_slurm_conf(LocalClusterConfig(state_dir=Path("/x")))
    text = render_slurm_conf(LocalClusterConfig(state_dir=Path("/x"), slurm_version=version))
    assert "ProctrackType=proctrack/linuxproc\n" in text and "TaskPlugin=task/none\n" in text
    assert "CgroupAutomount" not in text and "send_user_signal" not in text
    if expedite:
        assert text.replace(f"{EXPEDITE}\n", "") == today
    else:
        assert text == today  # 22.05 to 25.05: what the local 22.05 cluster has always had


def _runner(out: str, rc: int = 0):  # noqa: ANN202
    def run(argv, **_kw):  # noqa: ANN001, ANN202
        assert list(argv) == ["slurmctld", "-V"]
        return subprocess.CompletedProcess(argv, rc, out, "")
    return run


def _missing(argv, **_kw):  # noqa: ANN001, ANN202
    raise FileNotFoundError(argv[0])


def test_the_installed_version_comes_from_slurmctld():
    assert installed_slurm_version(_runner("slurm-wlm 22.05.8\n")) == (22, 5, 8)
    assert installed_slurm_version(_runner("slurm 25.11.8\n")) == (25, 11, 8)
    assert installed_slurm_version(_runner("", rc=1)) is None
    assert installed_slurm_version(_missing) is None


@pytest.mark.parametrize("version, params, text", [
    pytest.param("22.05.8", "", None, id="22.05-no-note"),
    pytest.param("25.11.8", "", "expedited requeue (--requeue=expedite, Slurm 25.11) is off: "
                 f"{EXPEDITE} allows it", id="25.11-off"),
    pytest.param("25.11.8", "enable_configless,enable_expedited_requeue",
                 f"expedited requeue allowed ({EXPEDITE})", id="25.11-on"),
])
def test_doctor_says_whether_expedited_requeue_is_allowed(version, params, text):
    result = check_requeue({"JobRequeue": "1", "SLURM_VERSION": version,
                            "SlurmctldParameters": params})
    assert result.level == "pass"
    if text is None:
        assert "expedite" not in result.message
    else:
        assert text in result.message
