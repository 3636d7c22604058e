"""Parsers of Slurm output, tested on output captured from a real Slurm 22.05 cluster.

The records in ``slurm_output/`` come from ``slurm_output/capture.py`` (local emulated cluster,
slurm-wlm 22.05.8). sacct could not be captured there (no slurmdbd); its table follows the
format sacct(1) documents for ``--parsable2``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from hpcflow.slurm.parse import (
    SQUEUE_FORMAT,
    QueueEntry,
    parse_duration_s,
    parse_sacct,
    parse_sbatch_parsable,
    parse_scontrol_record,
    parse_scontrol_show_job,
    parse_squeue,
    pick_job_record,
)

OUTPUT = Path(__file__).parent / "slurm_output"


def record(name: str) -> dict[str, Any]:
    return json.loads((OUTPUT / f"{name}.json").read_text())


# ---- squeue ---------------------------------------------------------------------------------


def test_captured_squeue_used_the_format_the_parser_expects() -> None:
    assert f"--Format={SQUEUE_FORMAT}" in record("squeue_mine")["argv"]


@pytest.mark.parametrize(
    ("job_id", "expected"),
    [
        pytest.param(
            "32",
            QueueEntry("32", "32", "hpcflow-cap-run", "RUNNING", None, 1, "n2", 11, 0),
            id="running",
        ),
        pytest.param(
            "37",
            QueueEntry("37", "37", "hpcflow-cap-rq", "PENDING", "BeginTime", 1, "", 0, 1),
            id="requeued-pending-begintime",
        ),
        pytest.param(
            "34_2",
            QueueEntry("34_2", "39", "hpcflow-cap-array", "RUNNING", None, 1, "n1", 11, 0),
            id="array-element",
        ),
        pytest.param(
            "33",
            QueueEntry("33", "33", "name with space|pipe", "RUNNING", None, 1, "n2", 11, 0),
            id="name-with-delimiter",
        ),
        pytest.param(
            "35",
            QueueEntry("35", "35", "hpcflow-cap-fail", "FAILED", "NonZeroExitCode", 1, "n1", 0, 0),
            id="failed",
        ),
        pytest.param(
            "36",
            QueueEntry("36", "36", "hpcflow-cap-done", "COMPLETED", None, 1, "n1", 0, 0),
            id="completed",
        ),
        pytest.param(
            "41",
            QueueEntry("41", "41", "hpcflow-cap-cxl", "CANCELLED", None, 1, "n1", 2, 0),
            id="cancelled",
        ),
    ],
)
def test_parse_squeue_real_output(job_id: str, expected: QueueEntry) -> None:
    entries = {e.job_id: e for e in parse_squeue(record("squeue_mine")["stdout"])}
    assert entries[job_id] == expected


def test_parse_squeue_lists_every_array_element_and_multi_node_jobs() -> None:
    entries = parse_squeue(record("squeue_all")["stdout"])
    assert len(entries) == len(record("squeue_all")["stdout"].splitlines())
    assert {e.job_id for e in entries} >= {"34_1", "34_2", "34_3"}
    multi = [e for e in entries if e.nodelist == "n[1-2]"]
    assert multi and all(e.nodes == 2 for e in multi)
    assert {e.state for e in entries} >= {"RUNNING", "PENDING", "COMPLETED", "FAILED", "CANCELLED"}


@pytest.mark.parametrize(
    "line",
    [
        pytest.param("1|1|RUNNING", id="too-few-fields"),
        pytest.param("1|1|RUNNING|None|x|n1|0:01|0|name", id="nodes-not-a-number"),
        pytest.param("1|1|RUNNING|None|1|n1|soon|0|name", id="bad-time"),
    ],
)
def test_parse_squeue_rejects_unexpected_lines(line: str) -> None:
    with pytest.raises(ValueError, match="squeue line"):
        parse_squeue(line)


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        pytest.param("0:00", 0, id="zero"),
        pytest.param("0:11", 11, id="seconds"),
        pytest.param("1:40", 100, id="minutes"),
        pytest.param("1:02:03", 3723, id="hours"),
        pytest.param("00:10:00", 600, id="padded"),
        pytest.param("2-01:00:00", 176400, id="days"),
        pytest.param("INVALID", 0, id="invalid"),
        pytest.param("UNLIMITED", 0, id="unlimited"),
    ],
)
def test_parse_duration(text: str, seconds: int) -> None:
    assert parse_duration_s(text) == seconds


def test_parse_duration_rejects_garbage() -> None:
    with pytest.raises(ValueError, match="not a Slurm duration"):
        parse_duration_s("12 minutes")


# ---- sbatch ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "job_id"),
    [
        pytest.param(record("sbatch_ok")["stdout"], "32", id="captured"),
        pytest.param("4242;cluster-a\n", "4242", id="federated"),
        pytest.param("sbatch: warning: x\n77\n", "77", id="after-a-warning"),
    ],
)
def test_parse_sbatch_parsable(text: str, job_id: str) -> None:
    assert parse_sbatch_parsable(text) == job_id


@pytest.mark.parametrize("text", [pytest.param("", id="empty"), pytest.param("Submitted", id="word")])
def test_parse_sbatch_parsable_rejects_output_without_id(text: str) -> None:
    with pytest.raises(ValueError, match="no job id"):
        parse_sbatch_parsable(text)


# ---- scontrol -------------------------------------------------------------------------------


def test_scontrol_values_with_spaces_are_kept_whole() -> None:
    (job,) = parse_scontrol_show_job(record("scontrol_show_spaces")["stdout"])
    assert job["JobId"] == "33"
    assert job["JobName"] == "name with space|pipe"
    assert job["Command"] == "/scratch/capture/dir with space/my job.sh"
    assert job["WorkDir"] == "/scratch/capture/dir with space"
    assert job["Comment"] == "a comment with spaces"
    assert job["StdOut"] == "/scratch/capture/dir with space/slurm-33.out"
    assert job["Power"] == ""


@pytest.mark.parametrize(
    ("name", "fields"),
    [
        pytest.param("scontrol_show_running", {"JobState": "RUNNING", "Restarts": "0",
                                               "NodeList": "n2", "BatchHost": "n2"}, id="running"),
        pytest.param("scontrol_show_requeued", {"JobState": "PENDING", "Reason": "BeginTime",
                                                "Restarts": "1", "NodeList": "", "Requeue": "1"},
                     id="requeued"),
        pytest.param("scontrol_show_failed", {"JobState": "FAILED", "ExitCode": "3:0",
                                              "Reason": "NonZeroExitCode"}, id="failed"),
        pytest.param("scontrol_show_completed", {"JobState": "COMPLETED", "ExitCode": "0:0"},
                     id="completed"),
    ],
)
def test_scontrol_records(name: str, fields: dict[str, str]) -> None:
    (job,) = parse_scontrol_show_job(record(name)["stdout"])
    assert {k: job[k] for k in fields} == fields
    # keys with '/' and ':' and values holding '=' survive
    assert job["CPUs/Task"] == "1"
    assert job["AllocNode:Sid"].startswith("localhost:")
    assert job["TRES"].startswith("cpu=1,")
    assert job["MCS_label"] == "N/A"


def test_array_id_lists_every_element_and_pick_finds_each() -> None:
    records = parse_scontrol_show_job(record("scontrol_show_array")["stdout"])
    assert [r["ArrayTaskId"] for r in records] == ["3", "2", "1"]
    assert pick_job_record(records, "34")["ArrayTaskId"] == "3"
    assert pick_job_record(records, "34_1")["JobId"] == "38"
    (element,) = parse_scontrol_show_job(record("scontrol_show_array_element")["stdout"])
    assert element["JobId"] == "39"
    assert pick_job_record([], "1") is None
    assert pick_job_record(records, "35") is None  # never another job's record


def test_lower_case_key_value_inside_a_value_stays_in_it() -> None:
    job = parse_scontrol_record("JobId=1 Comment=lr=0.1 and x=y JobState=RUNNING  ")
    assert job == {"JobId": "1", "Comment": "lr=0.1 and x=y", "JobState": "RUNNING"}


# ---- sacct (documented format; not capturable without slurmdbd) ------------------------------

SACCT = """\
120|120|REQUEUED|0:0|95|2024-05-01T10:00:00|2024-05-01T10:01:35|2|n[1-2]|train
120|120|COMPLETED|0:0|300|2024-05-01T10:04:00|2024-05-01T10:09:00|2|n[1-2]|train
120.batch|120.batch|COMPLETED|0:0|300|2024-05-01T10:04:00|2024-05-01T10:09:00|1|n1|batch
121_3|124|FAILED|3:0|5|2024-05-01T11:00:00|2024-05-01T11:00:05|1|n2|a|b
122|122|CANCELLED by 0|0:15|0|None|2024-05-01T12:00:00|0|None assigned|x
"""


def test_parse_sacct_rows() -> None:
    rows = parse_sacct(SACCT)
    assert [r.state for r in rows] == [
        "REQUEUED", "COMPLETED", "COMPLETED", "FAILED", "CANCELLED by 0"
    ]
    assert rows[0].elapsed_s == 95 and rows[0].nodes == 2 and rows[0].nodelist == "n[1-2]"
    assert rows[2].job_id == "120.batch"
    assert (rows[3].job_id, rows[3].job_id_raw, rows[3].exit_code) == ("121_3", "124", 3)
    assert rows[3].name == "a|b"
    assert (rows[4].exit_code, rows[4].exit_signal, rows[4].start) == (0, 15, "None")


def test_parse_sacct_rejects_short_lines() -> None:
    with pytest.raises(ValueError, match="sacct line"):
        parse_sacct("120|120|COMPLETED")
