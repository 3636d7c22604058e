"""`hpcflow sagemaker logs` and `report` against a moto server on loopback: a training job
submitted with the existing service, its CloudWatch Logs written as SageMaker writes them (log
group /aws/sagemaker/TrainingJobs, one stream per instance and container start), then read back
by the CLI: every request through boto3 (and botocore's validation), paging with nextToken,
following until the job's final status, and the goodput ledger from rank 0's tagged lines."""

from __future__ import annotations

import json
import time
import uuid

import pytest
from click.testing import CliRunner

from hpcflow.cli.main import cli
from hpcflow.sagemaker import logs as cw

pytestmark = [pytest.mark.moto]

SPEC = {
    "name": "tiny-sm",
    "platform": "sagemaker",
    "nodes": 2,
    "tasks_per_node": 2,
    "time_limit": "01:00:00",
    "program": {"module": "hpcflow.examples.train", "args": ["--steps", "10"]},
    "checkpoint": {"s3_uri": "s3://ckpt-bucket/runs/tiny", "interval_steps": 4},
    "sagemaker": {
        "image": "123456789012.dkr.ecr.us-east-1.amazonaws.com/train:1",
        "role_arn": "arn:aws:iam::123456789012:role/SageMakerTraining",
        "instance_type": "ml.g5.12xlarge",
        "output_s3_uri": "s3://ckpt-bucket/output",
    },
}


@pytest.fixture
def aws(moto_url, monkeypatch):  # noqa: ANN001, ANN201
    for name, value in {"AWS_ENDPOINT_URL_SAGEMAKER": moto_url,
                        "AWS_ENDPOINT_URL_CLOUDWATCH_LOGS": moto_url,
                        "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                        "AWS_DEFAULT_REGION": "us-east-1"}.items():
        monkeypatch.setenv(name, value)
    return cw.make_logs_client()


def submit(tmp_path) -> str:  # noqa: ANN001
    """Submit the spec under a name of its own (the moto server is shared by the module's
    tests, and two submits in one second would share a job name)."""
    spec = tmp_path / "job.yaml"
    spec.write_text(json.dumps({**SPEC, "run_dir": str(tmp_path / "run"),
                                "name": f"tiny-{uuid.uuid4().hex[:12]}"}))
    out = CliRunner().invoke(cli, ["submit", str(spec), "--json"])
    assert out.exit_code == 0, out.output
    return json.loads(out.output)["data"]["job_name"]


def put(logs, stream: str, messages: list[str], t0_ms: int) -> None:  # noqa: ANN001
    """Write ``messages`` into ``stream`` one second apart from ``t0_ms``, as SageMaker's log
    agent does (the group and stream made when missing)."""
    try:
        logs.create_log_group(logGroupName=cw.LOG_GROUP)
    except logs.exceptions.ResourceAlreadyExistsException:
        pass
    try:
        logs.create_log_stream(logGroupName=cw.LOG_GROUP, logStreamName=stream)
    except logs.exceptions.ResourceAlreadyExistsException:
        pass
    logs.put_log_events(logGroupName=cw.LOG_GROUP, logStreamName=stream, logEvents=[
        {"timestamp": t0_ms + 1000 * i, "message": m} for i, m in enumerate(messages)])


def steps(first: int, last: int) -> list[str]:
    return [f'hpcflow-step {{"step": {s}, "loss": 1.0, "step_time_s": 2.0}}'
            for s in range(first, last + 1)]


def write_interrupted_run(logs, name: str) -> int:  # noqa: ANN001
    """Rank 0 (algo-1) trains steps 1-6, commits step 4, is stopped (SIGTERM) and restarted in
    a new container (a new stream) that resumes from step 4: steps 5 and 6 are redone. algo-2
    prints a line of its own. Returns the first event's time (ms)."""
    t0 = int(time.time() * 1000)
    epoch = t0 // 1000
    put(logs, f"{name}/algo-1-{epoch}", [
        'hpcflow-start {"world_size": 4}', *steps(1, 4),
        'hpcflow-checkpoint {"step": 4, "reason": "interval", "save_s": 1.5}', *steps(5, 6),
        "not a tagged line", 'hpcflow-step {"step": "seven"}'], t0)
    put(logs, f"{name}/algo-2-{epoch}", ["hello from algo-2"], t0 + 500)
    put(logs, f"{name}/algo-1-{epoch + 60}", [
        'hpcflow-start {"world_size": 4}\nhpcflow-resume {"step": 4}', *steps(5, 10),
        'hpcflow-checkpoint {"step": 10, "reason": "final", "save_s": 1.0}'], t0 + 60_000)
    return t0


def test_logs_prints_every_instance_in_time_order(tmp_path, aws):
    name = submit(tmp_path)
    write_interrupted_run(aws, name)
    out = CliRunner().invoke(cli, ["sagemaker", "logs", name])
    assert out.exit_code == 0, out.output
    lines = out.output.splitlines()
    assert lines[0] == 'algo-1 hpcflow-start {"world_size": 4}'
    assert lines.index("algo-2 hello from algo-2") == 1  # 0.5 s after the first line
    assert lines.count('algo-1 hpcflow-start {"world_size": 4}') == 2
    assert lines[-1] == 'algo-1 hpcflow-checkpoint {"step": 10, "reason": "final", "save_s": 1.0}'
    assert len(lines) == 10 + 1 + 9  # every event; the two-line one as two lines
    only = CliRunner().invoke(cli, ["sagemaker", "logs", name, "--host", "algo-2"])
    assert only.output == "algo-2 hello from algo-2\n"


def test_reading_pages_with_next_tokens_gives_every_event_once(tmp_path, aws):
    name = submit(tmp_path)
    write_interrupted_run(aws, name)
    paged = cw.JobLogs(aws, name, page_size=3).read()
    whole = cw.JobLogs(aws, name).read()
    assert [x.message for x in paged] == [x.message for x in whole]
    assert len(whole) == 19 and [x.time_ms for x in whole] == sorted(x.time_ms for x in whole)
    assert {x.stream.rsplit("-", 1)[0] for x in whole} == {f"{name}/algo-1", f"{name}/algo-2"}


def test_follow_reads_until_the_final_status_and_each_event_once(tmp_path, aws):
    name = submit(tmp_path)
    t0 = write_interrupted_run(aws, name)
    statuses = iter(["InProgress", "InProgress", "Completed"])
    slept: list[float] = []

    def sleep(seconds: float) -> None:  # the job writes more while hpcflow waits
        slept.append(seconds)
        put(aws, f"{name}/algo-2-{t0 // 1000}", [f"later line {len(slept)}"],
            t0 + 120_000 + 1000 * len(slept))

    seen = list(cw.follow(cw.JobLogs(aws, name), lambda: next(statuses),
                          final=("Completed", "Failed", "Stopped"), sleep=sleep))
    assert slept == [cw.FOLLOW_INTERVAL_S] * 2
    messages = [x.message for x in seen]
    assert messages[-2:] == ["later line 1", "later line 2"]
    assert len(messages) == len(set(messages)) + 2  # steps 5 and 6, trained twice


def test_logs_follow_of_a_finished_job_prints_it_and_exits_0(tmp_path, aws):
    name = submit(tmp_path)  # moto's training jobs are Completed at once
    write_interrupted_run(aws, name)
    out = CliRunner().invoke(cli, ["sagemaker", "logs", name, "-f"])
    assert out.exit_code == 0, out.output
    assert out.output.count("\n") == 20


def test_a_job_without_logs_prints_nothing(tmp_path, aws):
    out = CliRunner().invoke(cli, ["sagemaker", "logs", "never-logged-anything"])
    assert out.exit_code == 0 and out.output == ""


def test_report_counts_useful_and_redone_steps_from_rank_0s_streams(tmp_path, aws):
    name = submit(tmp_path)
    write_interrupted_run(aws, name)
    out = CliRunner().invoke(cli, ["sagemaker", "report", name, "--json"])
    assert out.exit_code == 0, out.output
    rep = json.loads(out.stdout)["data"]
    assert rep["job_name"] == name and rep["status"] == "Completed" and rep["finished"]
    assert (rep["useful_steps"], rep["lost_steps"]) == (10, 2)
    assert rep["totals"]["training"] == 20.0 and rep["totals"]["lost"] == 4.0
    assert rep["totals"]["checkpointing"] == 2.5
    [attempt] = rep["attempts"]  # moto gives no Training transition: one from TrainingStartTime
    assert attempt["resumed_from"] == 4 and (attempt["first_step"], attempt["last_step"]) == (1, 10)
    assert rep["skipped"] == {"api": 0, "log": 1}  # the step whose number is text
    assert (rep["instance_count"], rep["gpus_per_instance"]) == (2, 4)
    assert rep["hours"]["useful_gpu"] == round(20.0 * 2 * 4 / 3600, 4)
    assert rep["billable_s"] is None and rep["hours"]["billed_gpu"] is None  # moto bills nothing
    table = CliRunner().invoke(cli, ["sagemaker", "report", name])
    assert table.exit_code == 0, table.output
    assert f"training job {name}" in table.output and "redone steps" in table.output
    assert "GPU-hours (4 per instance): useful 0.0444" in table.output


def test_report_of_an_unknown_job_says_so(aws):
    out = CliRunner().invoke(cli, ["sagemaker", "report", "no-such-job", "--json"])
    assert out.exit_code == 3
    assert "DescribeTrainingJob 'no-such-job' failed" in json.loads(out.output)["error"]["message"]
