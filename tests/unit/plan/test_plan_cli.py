"""``hpcflow plan goodput`` and ``plan layout``: results, JSON, the plot, --from-job, and hostile
input refused with the option named and what is allowed."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from click.testing import CliRunner

from hpcflow import protocol as P
from hpcflow.cli.main import cli
from hpcflow.jobs import records

GOODPUT = ["plan", "goodput", "--nodes", "16", "--instance", "p5.48xlarge", "--hours", "72",
           "--save-s", "30", "--restart-s", "300", "--startup-s", "600", "--price-source",
           "table", "--runs", "20"]
LAYOUT = ["plan", "layout", "--model", "llama-8b", "--instance", "p5.48xlarge", "--nodes", "1"]


def run(*args: str):
    return CliRunner().invoke(cli, list(args))


def _replace(words: list[str], option: str, value: str) -> list[str]:
    out = list(words)
    out[out.index(option) + 1] = value
    return out


def test_goodput_json_has_both_estimates_the_split_and_the_cost():
    result = run(*GOODPUT, "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)["data"]
    closed, sim = data["closed_form"], data["simulation"]
    assert 0.9 < closed["goodput"] < 1 and sim["runs"] == 20
    assert abs(closed["goodput"] - sim["goodput"]) < 0.01
    split = closed["gpu_hours"]
    assert split["total"] == 16 * 8 * 72
    assert set(split) == {"useful", "checkpointing", "lost_work", "restarts", "startups",
                          "total"}
    cost = data["cost"]
    # 16 nodes x 72 h x 98.32 USD (the shipped us-east-1 figure)
    assert cost["on_demand_usd"] == pytest.approx(16 * 72 * 98.32)
    assert cost["usd_per_useful_gpu_hour"] == pytest.approx(cost["on_demand_usd"]
                                                            / split["useful"])
    assert cost["spot_usd"] == pytest.approx([0.1 * cost["on_demand_usd"], cost["on_demand_usd"]])
    assert data["sources"]["failures_per_node_hour"].startswith("default: Llama 3")


def test_goodput_prints_the_table_the_interval_and_the_cost():
    result = run(*GOODPUT)
    assert result.exit_code == 0, result.output
    for words in ("closed form", "simulation (20 runs, seed 0)", "lost: restarts GPU-h",
                  "availability-optimal", "Young", "Daly", "per useful GPU-hour", "spot"):
        assert words in result.output, words


def test_a_given_interval_is_used_and_a_worse_one_gives_less(tmp_path: Path):
    best = json.loads(run(*GOODPUT, "--json").output)["data"]["closed_form"]
    short = json.loads(run(*GOODPUT, "--interval-s", "60", "--json").output)["data"]
    assert short["closed_form"]["interval_s"] == 60
    assert short["closed_form"]["interval_source"] == "given"
    assert short["closed_form"]["goodput"] < best["goodput"]


def test_the_plot_is_an_svg_with_one_curve_per_node_count(tmp_path: Path):
    svg = tmp_path / "g.svg"
    result = run(*GOODPUT, "--svg", str(svg))
    assert result.exit_code == 0, result.output
    root = ET.fromstring(svg.read_text())
    curves = root.findall("{http://www.w3.org/2000/svg}polyline")
    # 16 nodes: 4, 8, 16, 32 and 64 nodes
    assert [c.find("{http://www.w3.org/2000/svg}title").text for c in curves] == [
        "4 nodes", "8 nodes", "16 nodes", "32 nodes", "64 nodes"]


def test_from_job_takes_the_measured_costs(tmp_path: Path, monkeypatch):
    monkeypatch.setenv("HPCFLOW_HOME", str(tmp_path / "home"))
    run_dir = tmp_path / "run"
    t0 = 1_800_000_000.0
    records.record_submission(records.JobRecord("9", "j", str(run_dir), t0), "", "")
    steps = [f'hpcflow-step {{"step": {s}, "step_time_s": 1.0}}' for s in range(1, 41)]
    (run_dir / "j-9.out").write_text("\n".join([
        "hpcflow: 2027-01-15T08:00:05+0000 job 9 attempt 0 on n[1-2]: starting 4 rank(s)",
        'hpcflow-start {"world_size": 4}', *steps[:20],
        'hpcflow-checkpoint {"reason": "interval", "save_s": 4.0, "step": 20}', *steps[20:],
        'hpcflow-checkpoint {"reason": "final", "save_s": 6.0, "step": 40}']))
    for e in ({"event": "attempt_start", "time": t0 + 5, "job_id": "9", "restart": 0,
               "nodelist": "n[1-2]"},
              {"event": "step_end", "time": t0 + 65, "job_id": "9", "restart": 0, "rc": 0},
              {"event": "job_end", "time": t0 + 65, "job_id": "9", "restart": 0, "rc": 0,
               "reason": "completed"}):
        records.append_jsonl(P.ledger_path(run_dir), e)
    base = ["plan", "goodput", "--nodes", "16", "--instance", "p5.48xlarge", "--hours", "72",
            "--price-source", "table", "--runs", "5", "--from-job", "9"]
    # the job never restarted: its restart cost is unknown and must be given
    missing = run(*base)
    assert missing.exit_code == 2
    assert "--restart-s: no value (job 9 did not measure it)" in missing.output
    result = run(*base, "--restart-s", "120", "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)["data"]
    # saves: (4 + 6) / 2 = 5 s; start-up: 60 s held - 40 s training - 10 s saving = 10 s
    assert data["inputs"]["save_s"] == pytest.approx(5.0)
    assert data["inputs"]["startup_s"] == pytest.approx(10.0)
    assert data["sources"]["save_s"] == "measured in job 9"
    assert data["sources"]["restart_s"] == "given"
    # no failure measured: the default rate, not zero
    assert data["sources"]["failures_per_node_hour"].startswith("default:")
    assert data["doubts"] == [] and "warning" not in result.output


def test_from_job_with_impossible_figures_says_its_costs_are_doubtful(tmp_path: Path,
                                                                       monkeypatch):
    # 60 steps of 50 s each in 100 s of wall time: goodput 3000%.
    monkeypatch.setenv("HPCFLOW_HOME", str(tmp_path / "home"))
    run_dir = tmp_path / "run"
    t0 = 1_800_000_000.0
    records.record_submission(records.JobRecord("9", "j", str(run_dir), t0), "", "")
    steps = [f'hpcflow-step {{"step": {s}, "step_time_s": 50.0}}' for s in range(1, 61)]
    (run_dir / "j-9.out").write_text("\n".join([
        "hpcflow: 2027-01-15T08:00:05+0000 job 9 attempt 0 on n1: starting 1 rank(s)",
        *steps, 'hpcflow-checkpoint {"reason": "final", "save_s": 6.0, "step": 60}']))
    for e in ({"event": "attempt_start", "time": t0 + 10, "job_id": "9", "restart": 0,
               "nodelist": "n1"},
              {"event": "job_end", "time": t0 + 100, "job_id": "9", "restart": 0, "rc": 0,
               "reason": "completed"}):
        records.append_jsonl(P.ledger_path(run_dir), e)
    base = ["plan", "goodput", "--nodes", "16", "--instance", "p5.48xlarge", "--hours", "72",
            "--price-source", "table", "--runs", "5", "--from-job", "9", "--restart-s", "120"]
    for extra in (["--json"], []):
        result = run(*base, *extra)
        assert result.exit_code == 0, result.output
        assert "hpcflow: warning: job 9: goodput 3000% is impossible" in result.output
        assert "the costs measured in it may be as wrong" in result.output
    data = json.loads(run(*base, "--json").stdout)["data"]
    (doubt,) = data["doubts"]
    assert doubt.startswith("job 9: goodput 3000% is impossible")


@pytest.mark.parametrize(("option", "value", "message"), [
    pytest.param("--nodes", "0", "--nodes: '0' is not allowed; give a whole number at least 1",
                 id="no-nodes"),
    pytest.param("--nodes", "2.5", "--nodes: '2.5' is not allowed; give a whole number",
                 id="fractional-nodes"),
    pytest.param("--hours", "nan", "--hours: 'nan' is not allowed; give a number above 0",
                 id="nan-hours"),
    pytest.param("--hours", "1e9", "at most 87,600", id="too-many-hours"),
    pytest.param("--save-s", "-1", "--save-s: '-1' is not allowed; give a number at least 0",
                 id="negative-save"),
    pytest.param("--save-s", "inf", "--save-s: 'inf' is not allowed", id="infinite-save"),
    pytest.param("--instance", "p5.48xl", "did you mean 'p5.48xlarge'?", id="typo-instance"),
    pytest.param("--instance", "m5.xlarge", "has no GPUs", id="no-gpu-instance"),
    pytest.param("--runs", "0", "--runs: '0' is not allowed", id="no-runs"),
])
def test_goodput_refuses_hostile_input_naming_the_option(option, value, message):
    result = run(*_replace(GOODPUT, option, value))
    assert result.exit_code == 2, result.output
    assert message in result.output
    assert "Traceback" not in result.output
    envelope = json.loads(run(*_replace(GOODPUT, option, value), "--json").output)
    assert envelope["ok"] is False and envelope["error"]["type"] == "SpecError"


@pytest.mark.parametrize(("extra", "message"), [
    pytest.param(["--failure-rate", "-0.1"], "--failure-rate: '-0.1' is not allowed",
                 id="negative-rate"),
    pytest.param(["--interval-s", "0"], "--interval-s: '0' is not allowed; give a number above 0",
                 id="zero-interval"),
    pytest.param(["--from-job", "1;rm"], "--from-job: '1;rm' is not a Slurm job id",
                 id="hostile-job-id"),
    pytest.param(["--save-s", "0"], "save_s: 0 leaves no best interval", id="free-saves"),
])
def test_goodput_refuses_hostile_extras(extra, message):
    result = run(*GOODPUT, *extra)
    assert result.exit_code == 2, result.output
    assert message in result.output


def test_a_failure_storm_is_planned_without_overflow_or_endless_simulation():
    result = run(*_replace(_replace(GOODPUT, "--nodes", "100000"), "--hours", "87600"),
                 "--failure-rate", "1000", "--interval-s", "1e8", "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)["data"]
    assert data["closed_form"]["goodput"] == 0.0
    assert data["simulation"] is None
    assert any("simulation: 0 of 20 runs" in n for n in data["closed_form"]["notes"])


def test_layout_json_lists_every_layout_paralleldims_accepts():
    result = run(*LAYOUT, "--json")
    assert result.exit_code == 0, result.output
    layouts = json.loads(result.output)["data"]["layouts"]
    # 8 GPUs: dp * pp * tp = 8 with tp | 8: (8,1,1) (4,2,1) (4,1,2) ... 10 of them
    assert len(layouts) == 10
    assert all(x["dp"] * x["pp"] * x["tp"] == 8 for x in layouts)
    assert layouts[0]["fits_ckpt"]


@pytest.mark.parametrize(("extra", "message"), [
    pytest.param(["--model", "llama-7b"], "--model: 'llama-7b' is not a preset; allowed: "
                 "llama-8b, llama-70b, llama-405b", id="unknown-preset"),
    pytest.param(["--model", "llama-8b", "--seq-len", "0"], "--seq-len: '0' is not allowed",
                 id="zero-seq"),
    pytest.param(["--model", "llama-8b", "--headroom", "1"], "--headroom: '1' is not allowed",
                 id="no-memory-left"),
    pytest.param(["--params", "1000"], "--layers, --hidden, --heads, --seq-len: missing",
                 id="half-a-model"),
    pytest.param(["--params", "1000", "--layers", "2", "--hidden", "10", "--heads", "3",
                  "--seq-len", "8"], "heads: 3 does not divide hidden=10", id="bad-heads"),
])
def test_layout_refuses_hostile_input_naming_the_option(extra, message):
    base = ["plan", "layout", "--instance", "p5.48xlarge", "--nodes", "1"]
    result = run(*base, *extra)
    assert result.exit_code == 2, result.output
    assert message in result.output
    assert "Traceback" not in result.output


@pytest.mark.parametrize("option", ["--region", "--nodes", "--instance", "--from-job"])
def test_a_long_or_multi_line_option_value_is_shown_bounded_and_escaped(option):
    value = "a" * 5000 + "\nforged: line"
    words = GOODPUT + [option, value] if option in ("--region", "--from-job") else \
        _replace(GOODPUT, option, value)
    result = run(*words)
    assert result.exit_code == 2, result.output
    assert f"{option}: 'aaaa" in result.output and "'..." in result.output, result.output
    assert "forged" not in result.output and len(result.output) < 1000
