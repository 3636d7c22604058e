"""Every ``hpcflow`` command of docs/plan.md runs as written and exits 0. Job 4242, which the
page plans from, is a small past run written into a scratch HPCFLOW_HOME first: two nodes,
two saves, no restart (the page gives --restart-s for that reason)."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

from click.testing import CliRunner

from hpcflow import protocol as P
from hpcflow.cli.main import cli
from hpcflow.jobs import records

PAGE = Path(__file__).resolve().parents[3] / "docs" / "plan.md"
T0 = 1_800_000_000.0


def _commands(text: str) -> list[list[str]]:
    out = []
    for block in text.split("```bash\n")[1:]:
        for line in block.split("```", 1)[0].splitlines():
            if line.startswith("hpcflow "):
                out.append(shlex.split(line)[1:])
    return out


def _past_job(home: Path) -> None:
    run = home.parent / "run"
    records.record_submission(records.JobRecord("4242", "small", str(run), T0), "", "")
    steps = [f'hpcflow-step {{"step": {s}, "step_time_s": 1.0}}' for s in range(1, 41)]
    (run / "small-4242.out").write_text("\n".join([
        "hpcflow: 2027-01-15T08:00:05+0000 job 4242 attempt 0 on n[1-2]: starting 16 rank(s)",
        'hpcflow-start {"world_size": 16}', *steps[:20],
        'hpcflow-checkpoint {"reason": "interval", "save_s": 18.0, "step": 20}', *steps[20:],
        'hpcflow-checkpoint {"reason": "final", "save_s": 22.0, "step": 40}']))
    for event, t, extra in (("attempt_start", 5, {"nodelist": "n[1-2]"}),
                            ("step_end", 160, {"rc": 0}),
                            ("job_end", 160, {"rc": 0, "reason": "completed"})):
        records.append_jsonl(P.ledger_path(run), {"event": event, "time": T0 + t,
                                                  "job_id": "4242", "restart": 0, **extra})


def test_every_command_on_the_plan_page_runs(tmp_path: Path, monkeypatch):
    monkeypatch.setenv("HPCFLOW_HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)
    _past_job(tmp_path / "home")
    commands = _commands(PAGE.read_text())
    assert [" ".join(c[:2]) for c in commands] == [
        "report 4242", "plan goodput", "plan goodput", "plan goodput", "plan layout",
        "plan layout", "plan layout"]
    outputs = []
    for args in commands:
        print("$ hpcflow", " ".join(args))
        result = CliRunner().invoke(cli, args)
        assert result.exit_code == 0, result.output
        outputs.append(result.output)
    measured = json.loads(outputs[0])["data"]["measured"]
    assert measured["save_s"] == 20.0 and measured["nodes"] == 2
    assert "measured in job 4242" in outputs[1]
    assert (tmp_path / "goodput.svg").read_text().startswith("<svg")
    assert json.loads(outputs[-1])["ok"] is True


def test_the_figure_the_page_quotes_is_what_the_command_prints(tmp_path: Path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    text = PAGE.read_text()
    at_scale = next(c for c in _commands(text) if "2048" in c)
    result = CliRunner().invoke(cli, at_scale)
    assert result.exit_code == 0, result.output
    assert "gives 90.70%" in text
    assert re.search(r"goodput\s+│\s+90\.70%", result.output), result.output


def test_the_pages_spec_fragment_is_a_valid_checkpoint_block():
    import yaml

    from hpcflow.spec.job import JobSpec

    fragment = PAGE.read_text().split("```yaml\n", 1)[1].split("```", 1)[0]
    spec = JobSpec.model_validate({"name": "a", "time_limit": "10", "run_dir": "/tmp/r",
                                   "program": {"argv": ["true"]}, **yaml.safe_load(fragment)})
    assert spec.checkpoint.interval == "auto"
    assert spec.checkpoint.failures_per_node_hour == 0.000158
