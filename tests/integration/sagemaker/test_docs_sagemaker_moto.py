"""The `hpcflow sagemaker status|logs|report` block of docs/sagemaker.md, run as written against
moto: the page's training job is created with the example spec through the submit service, its
CloudWatch Logs written as SageMaker writes them (two algo-1 streams, the second after a
restart, and one of algo-2), then every line runs and exits 0, and what the page says of each
command holds."""

from __future__ import annotations

import json
import shlex
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from hpcflow.cli.main import cli
from hpcflow.sagemaker import logs as cw
from hpcflow.sagemaker import service
from hpcflow.spec.job import load_job_spec

pytestmark = [pytest.mark.moto]

REPO = Path(__file__).resolve().parents[3]
PAGE = (REPO / "docs" / "sagemaker.md").read_text()
LINES = [line for block in PAGE.split("```bash\n")[1:] for line in block.split("```", 1)[0]
         .splitlines() if line.startswith("hpcflow sagemaker ")]


def step(n: int) -> str:
    return f'hpcflow-step {{"step": {n}, "loss": 2.0, "step_time_s": 3.0}}'


def test_the_status_logs_and_report_commands_run_against_moto(moto_url, monkeypatch, tmp_path):
    for name, value in {"AWS_ENDPOINT_URL_SAGEMAKER": moto_url,
                        "AWS_ENDPOINT_URL_CLOUDWATCH_LOGS": moto_url,
                        "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                        "AWS_DEFAULT_REGION": "us-east-1"}.items():
        monkeypatch.setenv(name, value)
    assert len(LINES) == 5
    job_name = shlex.split(LINES[0])[3]
    spec = load_job_spec(str(REPO / "examples" / "sagemaker-spot.yaml"),
                         (f"run_dir={tmp_path / 'run'}",))
    assert service.submit(spec, job_name=job_name).job_arn
    logs = cw.make_logs_client()
    logs.create_log_group(logGroupName=cw.LOG_GROUP)
    t0 = int(time.time() * 1000)
    streams = {f"{job_name}/algo-1-{t0 // 1000}": ['hpcflow-start {"world_size": 8}',
                                                  *map(step, range(1, 26))],
               f"{job_name}/algo-2-{t0 // 1000}": ["algo-2 is up"],
               f"{job_name}/algo-1-{t0 // 1000 + 90}": ['hpcflow-start {"world_size": 8}',
                                                       'hpcflow-resume {"step": 20}',
                                                       *map(step, range(21, 61)),
                                                       'hpcflow-step {"step": null}']}
    for k, (stream, messages) in enumerate(streams.items()):
        logs.create_log_stream(logGroupName=cw.LOG_GROUP, logStreamName=stream)
        logs.put_log_events(logGroupName=cw.LOG_GROUP, logStreamName=stream, logEvents=[
            {"timestamp": t0 + 90_000 * (k == 2) + 500 * (k == 1) + 1000 * i, "message": m}
            for i, m in enumerate(messages)])

    monkeypatch.chdir(REPO)
    out = {line: CliRunner().invoke(cli, shlex.split(line)[1:]) for line in LINES}
    for line, result in out.items():
        assert result.exit_code == 0, f"{line}\n{result.output}"
    printed = out[LINES[1]].stdout.splitlines()
    assert printed[:2] == ['algo-1 hpcflow-start {"world_size": 8}', "algo-2 algo-2 is up"]
    assert len(printed) == 26 + 1 + 43 and printed.count('algo-1 hpcflow-start {"world_size": 8}') == 2
    followed = out[LINES[2]].stdout.splitlines()  # one host, to the job's final status
    assert followed == [p for p in printed if p.startswith("algo-1 ")]
    table = out[LINES[3]]
    for column in ("pending s", "startup s", "training s", "ckpt s", "lost s", "useful steps",
                   "redone steps"):
        assert column in table.stdout
    assert "skipped values that do not decode: 1 in the log" in table.stderr
    rep = json.loads(out[LINES[4]].stdout)["data"]
    assert (rep["useful_steps"], rep["lost_steps"], rep["totals"]["lost"]) == (60, 5, 15.0)
    assert rep["skipped"] == {"api": 0, "log": 1}
    assert {"interruptions", "restarts", "max_wait_exceeded", "training_time_s", "billable_s",
            "spot_saving", "hours", "billed_per_useful"} <= set(rep)
    assert rep["hours"]["useful_instance"] == round(60 * 3.0 * 2 / 3600, 4)
    status = json.loads(CliRunner().invoke(cli, ["sagemaker", "status", job_name, "--json"])
                        .stdout)["data"]
    assert status["job_name"] == job_name
    pointed = CliRunner().invoke(cli, ["status", job_name])
    assert pointed.exit_code == 2
    assert f"hpcflow sagemaker status {job_name}" in " ".join(pointed.output.split())
