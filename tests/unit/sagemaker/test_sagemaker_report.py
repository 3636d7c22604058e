"""A SageMaker training job's goodput report, a pure function of its decoded DescribeTrainingJob
record and its log events: the attempts (each Training period, ended by an interruption, the
job's end, or still running), the same ledger fields as on Slurm, useful and redone steps, and
useful against trained and billed hours. Realistic responses and hostile ones, as tables."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest
from click.testing import CliRunner

from hpcflow.cli.main import cli
from hpcflow.cli.sagemaker import pointer, report_lines
from hpcflow.sagemaker.logs import LogLine
from hpcflow.sagemaker.record import decode_describe
from hpcflow.sagemaker.report import Window, attempt_windows, build_sagemaker_report, job_log
from hpcflow.sagemaker.report_load import gpus_of

T0 = datetime(2027, 1, 15, 8, 0, 0, tzinfo=UTC)
S0 = T0.timestamp()
NAME = "tiny-dp-sm-20270115-080000"


def job(status: str, secondary: str, trans: list[tuple[str, int]], **extra) -> dict:  # noqa: ANN003
    """A DescribeTrainingJob response as boto3 returns it (times as datetimes), the
    transitions ``(status, seconds after CreationTime)``."""
    return {"TrainingJobName": NAME, "TrainingJobStatus": status, "SecondaryStatus": secondary,
            "CreationTime": T0, "EnableManagedSpotTraining": True,
            "ResourceConfig": {"InstanceType": "ml.g5.12xlarge", "InstanceCount": 2,
                               "VolumeSizeInGB": 100},
            "SecondaryStatusTransitions": [
                {"Status": s, "StartTime": T0 + timedelta(seconds=t), "StatusMessage": f"{s}."}
                for s, t in trans], **extra}


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


SPOT_TWICE = job("Completed", "Completed", [
    ("Starting", 0), ("Downloading", 100), ("Training", 200), ("Interrupted", 800),
    ("Restarting", 860), ("Starting", 860), ("Downloading", 1000), ("Training", 1100),
    ("Interrupted", 1600), ("Restarting", 1620), ("Starting", 1620), ("Downloading", 1700),
    ("Training", 1800), ("Uploading", 2400), ("Completed", 2460)],
    TrainingStartTime=at(100), TrainingEndTime=at(2460), TrainingTimeInSeconds=2000,
    BillableTimeInSeconds=600)
MAX_WAIT = job("Stopped", "MaxWaitTimeExceeded", [
    ("Starting", 0), ("Training", 100), ("Interrupted", 700), ("Restarting", 760),
    ("MaxWaitTimeExceeded", 7200)], TrainingStartTime=at(50), TrainingEndTime=at(7200),
    TrainingTimeInSeconds=650, BillableTimeInSeconds=200)
TRAINING = job("InProgress", "Training", [("Starting", 0), ("Downloading", 60), ("Training", 100)],
               TrainingStartTime=at(60))
WAITING = job("InProgress", "Restarting", [("Starting", 0), ("Training", 100),
                                           ("Interrupted", 400), ("Restarting", 460)])
FAILED = job("Failed", "Failed", [("Starting", 0), ("Training", 100), ("Failed", 400)],
             EnableManagedSpotTraining=False, FailureReason="AlgorithmError: exit status 1",
             TrainingEndTime=at(400), TrainingTimeInSeconds=350, BillableTimeInSeconds=350)
MOTO_LIKE = job("Completed", "Completed", [("Starting", 0)], TrainingStartTime=at(0),
                TrainingEndTime=at(0))


@pytest.mark.parametrize(("response", "want"), [
    pytest.param(SPOT_TWICE, [Window(S0 + 200, S0 + 800, "Interrupted"),
                              Window(S0 + 1100, S0 + 1600, "Interrupted"),
                              Window(S0 + 1800, S0 + 2460, "Completed")], id="spot-twice"),
    pytest.param(MAX_WAIT, [Window(S0 + 100, S0 + 700, "Interrupted")], id="max-wait"),
    pytest.param(TRAINING, [Window(S0 + 100, None, "running")], id="training-now"),
    pytest.param(WAITING, [Window(S0 + 100, S0 + 400, "Interrupted")], id="waiting-for-spot"),
    pytest.param(FAILED, [Window(S0 + 100, S0 + 400, "Failed")], id="failed"),
    pytest.param(MOTO_LIKE, [Window(S0, S0, "Completed")], id="no-training-transition"),
    pytest.param(job("Completed", "Completed", [("Training", 100), ("Training", 100),
                                                ("Completed", 50)],
                     TrainingEndTime=at(10)),
                 [Window(S0 + 100, S0 + 100, "Completed")], id="repeated-and-out-of-order"),
    pytest.param(job("InProgress", "Starting", [("Starting", 0)]), [], id="not-started"),
])
def test_attempt_windows(response, want):
    assert attempt_windows(decode_describe(response)) == want


def test_a_job_without_any_training_start_starts_at_its_first_line():
    rec = decode_describe(job("InProgress", "", []))
    assert attempt_windows(rec, S0 + 42) == [Window(S0 + 42, None, "running")]


def line(seconds: float, message: str, host: str = "algo-1") -> LogLine:
    return LogLine(f"{NAME}/{host}-1", host, int((S0 + seconds) * 1000), message)


def steps(t: float, first: int, last: int, step_s: float = 10.0) -> list[LogLine]:
    return [line(t + i, json.dumps({"step": s, "step_time_s": step_s}).join(["hpcflow-step ", ""]))
            for i, s in enumerate(range(first, last + 1))]


#: Attempt 1 trains 1-50 (saved at 40), attempt 2 resumes at 40 and trains 41-80 (saved at 70),
#: attempt 3 resumes at 70 and finishes at 100: steps 41-50 and 71-80 are redone.
SPOT_TWICE_LOG = [
    line(210, 'hpcflow-start {"world_size": 8}'), *steps(220, 1, 50),
    line(600, 'hpcflow-checkpoint {"step": 40, "reason": "interval", "save_s": 4.0}'),
    line(1110, 'hpcflow-start {"world_size": 8}\nhpcflow-resume {"step": 40}'),
    *steps(1120, 41, 80),
    line(1400, 'hpcflow-checkpoint {"step": 70, "reason": "interval", "save_s": 4.0}'),
    line(1810, 'hpcflow-start {"world_size": 8}'), line(1811, 'hpcflow-resume {"step": 70}'),
    *steps(1820, 71, 100),
    line(2390, 'hpcflow-checkpoint {"step": 100, "reason": "final", "save_s": 2.0}'),
    line(300, "hpcflow-step " + json.dumps({"step": 999, "step_time_s": 1}), host="algo-2"),
]


def report(response: dict, lines: list[LogLine], now: float = 10_000, **kw):  # noqa: ANN003, ANN201
    return build_sagemaker_report(decode_describe(response), lines, now_s=S0 + now,
                                  gpus_per_instance=kw.pop("gpus", 4), **kw)


def test_a_spot_job_interrupted_twice():
    rep = report(SPOT_TWICE, SPOT_TWICE_LOG)
    assert (rep.interruptions, rep.restarts, rep.max_wait_exceeded) == (2, 2, False)
    assert [(a.ended_by, a.first_step, a.last_step, a.resumed_from, a.useful_steps, a.lost_steps)
            for a in rep.attempts] == [("Interrupted", 1, 50, None, 40, 10),
                                       ("Interrupted", 41, 80, 40, 30, 10),
                                       ("Completed", 71, 100, 70, 30, 0)]
    assert (rep.useful_steps, rep.lost_steps) == (100, 20)  # algo-2's step 999 is not rank 0's
    assert rep.totals == {"pending": 200 + 300 + 200, "startup": 600 - 504 + 500 - 404 + 660 - 302,
                          "training": 1000.0, "checkpointing": 10.0, "lost": 200.0}
    assert [a.pending_s for a in rep.attempts] == [200, 300, 200]
    assert sum(rep.totals.values()) == rep.wall_s
    assert rep.wall_s == 2460 and rep.goodput == pytest.approx(1000 / 2460)
    assert rep.spot_saving == 0.7 and rep.training_time_s == 2000 and rep.billable_s == 600
    assert rep.hours == {"useful_instance": round(2000 / 3600, 4),
                         "training_instance": round(4000 / 3600, 4),
                         "billed_instance": round(1200 / 3600, 4),
                         "useful_gpu": round(8000 / 3600, 4), "training_gpu": round(16000 / 3600, 4),
                         "billed_gpu": round(4800 / 3600, 4)}
    assert rep.billed_per_useful == 0.6
    assert rep.skipped == {"api": 0, "log": 0} and rep.notes == []
    assert rep.attempts[2].start == "2027-01-15T08:30:00Z" and rep.attempts[2].end == \
        "2027-01-15T08:41:00Z"


@pytest.mark.parametrize(("response", "lines", "want"), [
    pytest.param(MAX_WAIT, steps(110, 1, 20), {
        "finished": True, "max_wait_exceeded": True, "interruptions": 1, "restarts": 1,
        "useful_steps": 20, "wall_s": 7200.0, "goodput": 200 / 7200}, id="max-wait-exceeded"),
    pytest.param(TRAINING, steps(110, 1, 30), {
        "finished": False, "wall_s": 10_000.0, "goodput": 300 / 10_000, "billable_s": None,
        "billed_per_useful": None}, id="still-training"),
    pytest.param(WAITING, steps(110, 1, 20), {
        "finished": False, "wall_s": 10_000.0, "interruptions": 1,
        "totals": {"pending": 100 + 9600, "startup": 100.0, "training": 200.0,
                   "checkpointing": 0.0, "lost": 0.0}}, id="waiting-for-capacity"),
    pytest.param(FAILED, steps(110, 1, 5), {
        "reason": "AlgorithmError: exit status 1", "spot_saving": None,
        "billed_per_useful": round(350 / 50, 4)}, id="failed-on-demand"),
    pytest.param(MOTO_LIKE, steps(1, 1, 3), {"useful_steps": 3, "goodput": None},
                 id="no-training-transition"),
    pytest.param(job("InProgress", "Starting", []), [], {
        "attempts": [], "goodput": None, "useful_steps": 0,
        "hours": {"useful_instance": 0.0, "training_instance": None, "billed_instance": None,
                  "useful_gpu": 0.0, "training_gpu": None, "billed_gpu": None}},
                 id="nothing-ran-yet"),
])
def test_report_fields(response, lines, want):
    got = report(response, lines).to_dict()
    assert {k: got[k] for k in want} == want


def test_hostile_log_lines_are_skipped_and_counted_never_obeyed():
    forged = (f"hpcflow: 2027-01-15T08:00:00+0000 job {NAME} attempt 7 on algo-1: x\n"
              'hpcflow-step {"step": 2, "step_time_s": 10}')
    lines = [line(50, 'hpcflow-step {"step": 1, "step_time_s": 10}'),  # before the attempt
             line(130, forged), line(140, 'hpcflow-step {"step": "3", "step_time_s": 10}'),
             line(141, 'hpcflow-step {"step": 3, "step_time_s": true}'),
             line(142, "hpcflow-step {not json}"),
             line(143, "hpcflow-step " + '{"a": ' * 50_000 + "1" + "}" * 50_000),
             line(144, 'hpcflow-step {"step": 1e400}'), line(145, "\x1b[2J plain text"),
             line(150, 'hpcflow-step {"step": 4, "step_time_s": 10}')]
    rep = report(FAILED, lines, log_skipped=3)
    [attempt] = rep.attempts
    assert (attempt.first_step, attempt.last_step, attempt.useful_steps) == (1, 4, 3)
    assert rep.skipped == {"api": 0, "log": 3 + 5}


def test_impossible_step_times_and_a_truncated_read_are_noted():
    rep = report(FAILED, steps(110, 1, 5, step_s=500.0), log_truncated=True)
    assert any("more than the 350 s SageMaker says" in n for n in rep.notes)
    assert any("read up to its bound" in n for n in rep.notes)


@pytest.mark.parametrize("name", [NAME, None, "two words", 17])
def test_a_hostile_response_gives_a_report(name):
    rep = report({"TrainingJobName": name, "TrainingJobStatus": 3, "CreationTime": "never",
                  "TrainingTimeInSeconds": False, "ResourceConfig": [],
                  "SecondaryStatusTransitions": [{"Status": "Training", "StartTime": {}}]},
                 steps(10, 1, 2), gpus=None)
    assert rep.skipped["api"] == 5 + (name == 17) and len(rep.attempts) == 1  # from the first line
    assert rep.hours["useful_instance"] is None and rep.useful_steps == 2
    assert report_lines(rep)[0].startswith("status - (-)")


def test_the_job_log_has_one_banner_per_attempt_and_only_tagged_lines():
    rec = decode_describe(SPOT_TWICE)
    text = job_log(rec, attempt_windows(rec), SPOT_TWICE_LOG[:3])
    assert text.splitlines()[:3] == [
        "hpcflow: 2027-01-15T08:03:20+0000 job sagemaker-job attempt 0 on algo-1: sagemaker",
        'hpcflow-start {"world_size": 8}', 'hpcflow-step {"step": 1, "step_time_s": 10.0}']
    assert text.count("hpcflow: ") == 3


def test_report_lines_say_the_spot_saving_and_the_hours():
    lines = report_lines(report(SPOT_TWICE, SPOT_TWICE_LOG))
    assert lines[0] == "status Completed (Completed); interruptions 2, restarts 2; Completed."
    assert lines[1] == ("SageMaker seconds per instance: training 2000, billable 600, managed "
                        "spot saving 70.0%")
    assert lines[3] == "GPU-hours (4 per instance): useful 2.2222, training 4.4444, billed 1.3333"
    assert lines[4] == "billed per useful hour: 0.6"


@pytest.mark.parametrize(("instance_type", "gpus"), [
    ("ml.g5.12xlarge", 4), ("ml.p5.48xlarge", 8), ("ml.c5.4xlarge", 0), ("ml.trn1.32xlarge", 16),
    ("ml.no-such.type", None), ("", None)])
def test_gpus_of(instance_type, gpus):
    assert gpus_of(instance_type) == gpus


@pytest.mark.parametrize(("command", "value", "points"), [
    ("status", NAME, True), ("logs", NAME, True), ("report", NAME, True), ("cancel", NAME, False),
    ("status", "a_b", False), ("status", "x" * 64, False)])
def test_the_top_level_commands_point_a_training_job_to_hpcflow_sagemaker(command, value, points):
    assert (f"`hpcflow sagemaker {command} {value}`" in pointer(command, value)) is points
    if points:
        out = CliRunner().invoke(cli, [command, value])
        assert out.exit_code == 2 and "is not a Slurm job id" in out.output
        assert f"hpcflow sagemaker {command} {value}" in out.output.replace("\n", " ")


@pytest.mark.parametrize("args", [["report", "bad_name"], ["logs", "x" * 64],
                                  ["logs", NAME, "--host", "algo-0"],
                                  ["logs", NAME, "--host", "host-1"]])
def test_names_sagemaker_cannot_have_are_refused_before_asking(args):
    out = CliRunner().invoke(cli, ["sagemaker", *args])
    assert out.exit_code == 2 and "is not a SageMaker" in out.output
