"""render_sbatch: golden files, #SBATCH lines, quoting of hostile values, ShellCheck."""

from __future__ import annotations

import difflib
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import jinja2
import pytest
from batch_script import ranks_env, step_command, supervisor_config

from hpcflow.slurm.render import render_sbatch, sbatch_value
from hpcflow.spec.job import JobSpec

GOLDEN_DIR = Path(__file__).parent / "test_render_sbatch_golden"
PYTHON = "/opt/venv/bin/python"
HOSTILE = "it's a \"$(touch /tmp/pwned)\" `id` $HOME\n'; rm -rf / #"


def job(**changes: Any) -> JobSpec:
    data: dict[str, Any] = {
        "name": "toy",
        "nodes": 2,
        "tasks_per_node": 2,
        "cpus_per_task": 1,
        "time_limit": "00:30:00",
        "run_dir": "/scratch/runs/toy",
        "program": {"module": "hpcflow.examples.train", "args": ["--steps", "200"]},
    }
    data.update(changes)
    return JobSpec.model_validate(data)


SPECS = {
    "srun-module": job(),
    "srun-resilience-off": job(resilience=False),
    "srun-gpu-argv-env": job(
        gpus_per_node=8,
        tasks_per_node=8,
        cpus_per_task=12,
        partition="gpu",
        account="ml-team",
        program={"argv": ["/opt/bin/train", "--config", "a b.yaml"]},
        env={"NCCL_DEBUG": "INFO", "ODD": HOSTILE},
        preemption={"signal_lead_s": 300, "max_requeues": 5},
        checkpoint={"dir": "/fsx/ckpt", "keep": 2, "interval_steps": 1000},
    ),
    "torchrun-container": job(
        launcher="torchrun",
        gpus_per_node=4,
        tasks_per_node=4,
        run_dir="/scratch/it's $(odd) `dir`",
        container={"image": "nvcr.io#nvidia/pytorch:24.05-py3", "mounts": ["/fsx:/fsx", "/a:/b:ro"]},
        program={"module": "pkg.train", "args": [HOSTILE]},
    ),
    "torchrun-argv": job(launcher="torchrun", program={"argv": ["/opt/bin/train.sh", "--x"]}),
    "srun-spot-watch": job(preemption={"spot_watch": True}),
    "srun-s3-mirror": job(checkpoint={"keep": 2, "s3_uri": "s3://ckpt-bucket/runs/it's"}),
    "srun-resilience": job(resilience={"max_in_job_restarts": 1, "max_failures": 2,
                                       "timeouts": {"step_floor_s": 20, "step_s": 90}}),
    "srun-resilience-no-watchdog": job(resilience={"watchdog": False}),
    "srun-spare-nodes": job(nodes=2, resilience={"spare_nodes": 1, "exclude_after_failures": 1}),
    "srun-checkpoint-auto": job(checkpoint={"interval": "auto", "failures_per_node_hour": 0.002}),
}


def shellcheck_path() -> str:
    path = shutil.which("shellcheck")
    if path is None:
        pytest.fail("shellcheck is not installed; install it (apt-get install shellcheck) to test "
                    "the rendered batch scripts")
    return path


# ---- golden files ---------------------------------------------------------------------------


@pytest.mark.parametrize("case", sorted(SPECS))
def test_render_sbatch_golden(case: str) -> None:
    """The whole rendered script equals the golden file; HPCFLOW_REGEN_GOLDEN=1 rewrites it."""
    text = render_sbatch(SPECS[case], python=PYTHON)
    golden = GOLDEN_DIR / f"{case}.sbatch"
    if os.environ.get("HPCFLOW_REGEN_GOLDEN") == "1":
        golden.parent.mkdir(exist_ok=True)
        golden.write_text(text, encoding="utf-8")
    if not golden.exists():
        pytest.fail(f"{golden} is missing; run with HPCFLOW_REGEN_GOLDEN=1 to create it")
    expected = golden.read_text(encoding="utf-8")
    if text != expected:
        diff = "".join(
            difflib.unified_diff(
                expected.splitlines(keepends=True),
                text.splitlines(keepends=True),
                fromfile=str(golden),
                tofile="rendered",
            )
        )
        pytest.fail(f"rendered script differs from the golden file:\n{diff}")


# ---- ShellCheck -----------------------------------------------------------------------------


@pytest.mark.parametrize("case", sorted(SPECS))
def test_rendered_script_is_shellcheck_clean(case: str, tmp_path: Path) -> None:
    script = tmp_path / "job.sbatch"
    script.write_text(render_sbatch(SPECS[case], python=PYTHON), encoding="utf-8")
    out = subprocess.run(
        [shellcheck_path(), "--severity=style", "--shell=bash", str(script)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert out.returncode == 0, out.stdout + out.stderr


def test_rendered_script_is_valid_bash(tmp_path: Path) -> None:
    for case, spec in SPECS.items():
        script = tmp_path / f"{case}.sbatch"
        script.write_text(render_sbatch(spec, python=PYTHON), encoding="utf-8")
        out = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True, check=False)
        assert out.returncode == 0, f"{case}: {out.stderr}"


# ---- #SBATCH lines --------------------------------------------------------------------------


def sbatch_lines(text: str) -> list[str]:
    """#SBATCH lines sbatch reads: those before the first command (sbatch(1), DESCRIPTION)."""
    lines = []
    for line in text.splitlines()[1:]:
        if line and not line.startswith("#"):
            break
        if line.startswith("#SBATCH "):
            lines.append(line[len("#SBATCH ") :])
    return lines


def test_sbatch_lines_are_sorted_and_carry_the_protocol_flags() -> None:
    lines = sbatch_lines(render_sbatch(SPECS["srun-module"], python=PYTHON))
    assert lines == sorted(lines)
    assert lines == [
        "--cpus-per-task=1",
        "--job-name=toy",
        "--nodes=2",
        "--ntasks-per-node=2",
        "--open-mode=append",
        '--output="/scratch/runs/toy/%x-%j.out"',
        "--requeue",
        "--signal=B:USR1@120",
        "--time=00:30:00",
    ]


def test_optional_sbatch_lines_appear_only_when_set() -> None:
    lines = sbatch_lines(render_sbatch(SPECS["srun-gpu-argv-env"], python=PYTHON))
    assert "--gpus-per-node=8" in lines
    assert "--partition=gpu" in lines
    assert "--account=ml-team" in lines
    assert "--signal=B:USR1@300" in lines
    plain = " ".join(sbatch_lines(render_sbatch(SPECS["srun-module"], python=PYTHON)))
    assert "--gpus-per-node" not in plain and "--partition" not in plain and "--account" not in plain


def test_hostile_run_dir_is_double_quoted_on_sbatch_lines() -> None:
    lines = sbatch_lines(render_sbatch(SPECS["torchrun-container"], python=PYTHON))
    assert '--output="/scratch/it\'s $(odd) `dir`/%x-%j.out"' in lines


@pytest.mark.parametrize(
    ("value", "quoted"),
    [
        pytest.param("gpu", "gpu", id="plain"),
        pytest.param("a b", '"a b"', id="space"),
        pytest.param('a"b', '"a\\"b"', id="double-quote"),
        pytest.param("a\\b", '"a\\\\b"', id="backslash"),
        pytest.param("a#b", '"a#b"', id="hash-would-start-a-comment"),
    ],
)
def test_sbatch_value_quoting(value: str, quoted: str) -> None:
    assert sbatch_value(value) == quoted


# ---- shell values ---------------------------------------------------------------------------


def exported(text: str) -> dict[str, str]:
    """Values of `export NAME=<shell words>` lines, decoded the way bash would."""
    values = {}
    for match in re.finditer(r"^export ([A-Za-z_0-9']+)=((?:'[^']*'|\"[^\"]*\"|[^\s'\"])*)$",
                             text, flags=re.M):
        words = shlex.split(match.group(2))
        values[shlex.split(match.group(1))[0]] = words[0] if words else ""
    return values


def test_env_and_protocol_values_are_exported_literally() -> None:
    spec = SPECS["srun-gpu-argv-env"]
    text = render_sbatch(spec, python=PYTHON)
    values = exported(text)
    assert values["ODD"] == HOSTILE
    assert values["NCCL_DEBUG"] == "INFO"
    assert values["HPCFLOW_RUN_DIR"] == "/scratch/runs/toy"
    assert values["HPCFLOW_CHECKPOINT_DIR"] == "/fsx/ckpt"
    # The rest the supervisor exports to the ranks, after the spec's env.
    ranks = ranks_env(text)
    assert ranks["HPCFLOW_CHECKPOINT_INTERVAL"] == "1000"
    assert ranks["HPCFLOW_CHECKPOINT_KEEP"] == "2"
    assert ranks["HPCFLOW_MAX_REQUEUES"] == "5"


def test_the_step_is_srun_with_kill_on_bad_exit_and_the_nodes_excluded() -> None:
    text = render_sbatch(SPECS["srun-module"], python=PYTHON)
    words = step_command(text, exclude=["n3"])
    assert words[:8] == [
        "srun",
        "--kill-on-bad-exit=1",
        "--nodes=2",
        "--ntasks=4",
        "--ntasks-per-node=2",
        "--cpus-per-task=1",
        "--exclude=n3",  # the nodes the supervisor excluded (resilience is on)
        PYTHON,
    ]
    assert words[8:] == ["-m", "hpcflow.examples.train", "--steps", "200"]
    assert "--exclude" not in " ".join(step_command(text))


def test_torchrun_runs_one_task_per_node_and_keeps_the_flag_file() -> None:
    text = render_sbatch(SPECS["torchrun-container"], python=PYTHON)
    step = step_command(text, host="gpu-1", job_id="777", nnodes="2")
    assert step[3:6] == ["--ntasks=2", "--ntasks-per-node=1", "--cpus-per-task=4"]
    assert "--container-image=nvcr.io#nvidia/pytorch:24.05-py3" in step
    assert "--container-mounts=/fsx:/fsx,/a:/b:ro" in step
    assert step[step.index("-m") - 1:step.index("-m") + 2] == [PYTHON, "-m",
                                                               "torch.distributed.run"]
    assert "--nproc-per-node=4" in step and "--rdzv-backend=c10d" in step
    assert "--rdzv-endpoint=gpu-1:20777" in step and "--nnodes=2" in step
    assert step[-3:] == ["-m", "pkg.train", HOSTILE]
    # torchrun dies on USR1: the supervisor never forwards it there (test_warning_rules); the
    # shell only passes the warning on to the supervisor.
    assert supervisor_config(text)["launcher"] == "torchrun"
    assert "kill -s \"$1\" \"$hpcflow_pid\"" in text


def test_the_trap_passes_the_warning_to_the_supervisor_and_never_term() -> None:
    text = render_sbatch(SPECS["srun-module"], python=PYTHON)
    handler = text[text.index("hpcflow_pass_on() {"):text.index("\n}\n", text.index("hpcflow_pass_on"))]
    # The line in the signals file, then the signal to the supervisor, which forwards the spec's
    # signal to srun (test_warning_rules: once every rank joined); this shell never sends TERM,
    # which srun turns into KILL for the tasks.
    assert '>>"$hpcflow_signals"' in handler and 'kill -s "$1" "$hpcflow_pid"' in handler
    assert "trap 'hpcflow_pass_on USR1' USR1" in text
    assert "TERM" not in re.sub(r"#.*", "", handler)
    assert "trap '' TERM" in text  # the shell outlives Slurm's TERM to keep the last word
    assert "set -uo pipefail" in text and "set -e" not in text


def test_default_python_is_the_running_interpreter() -> None:
    text = render_sbatch(SPECS["srun-module"])
    assert step_command(text)[6:9] == [sys.executable, "-m", "hpcflow.examples.train"]
    assert f"exec {shlex.quote(sys.executable)} -m hpcflow.supervisor run" in text


def test_spec_python_wins_over_the_default() -> None:
    spec = job(program={"module": "m", "python": "/usr/bin/python3.11"})
    assert step_command(render_sbatch(spec, python=PYTHON))[-3:] == ["/usr/bin/python3.11",
                                                                     "-m", "m"]


def test_hpcflows_own_processes_use_hpcflows_interpreter_not_the_programs() -> None:
    # The program's interpreter may be a container's, without hpcflow; the supervisor, the spot
    # watcher and the S3 mirror run on the node with the interpreter that has hpcflow.
    spec = job(program={"module": "m", "python": "/usr/bin/python3.11"},
               preemption={"spot_watch": True},
               checkpoint={"s3_uri": "s3://ckpt-bucket/runs"})
    text = render_sbatch(spec, python=PYTHON)
    cfg = supervisor_config(text)
    assert cfg["hpcflow_python"] == PYTHON and cfg["spot_watch_nodes"] == 2
    assert cfg["mirror"] == {"s3_uri": "s3://ckpt-bucket/runs", "keep": 3}
    assert f"exec {PYTHON} -m hpcflow.supervisor run" in text
    assert "/usr/bin/python3.11 -m hpcflow" not in text


def test_template_environment_rejects_undefined_names() -> None:
    from hpcflow.slurm.render import _environment

    with pytest.raises(jinja2.UndefinedError):
        _environment().from_string("{{ missing }}").render()
    assert _environment().autoescape is False
