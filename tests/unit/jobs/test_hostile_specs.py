"""Property test: hostile and mistaken job specs through ``hpcflow submit --dry-run``.

Hypothesis builds specs from a valid one by putting hostile values (control characters, ANSI
escapes, shell syntax, lone surrogates, huge integers, nested lists, Slurm's and bash's own
variable names, paths that escape, ...) into one to three fields, in the file or through
``--set``, and alias bombs, recursive anchors and deep nesting as whole files. For each:

- the exit code is 0 or 2, or 3 for an unusable run_dir, never 1 (a bug);
- nothing is written: the scratch folder and HPCFLOW_HOME are as before;
- every problem line names a field that was changed (or one it constrains), escaped;
- an accepted spec's script passes ``bash -n``, its ``#SBATCH`` header holds exactly the
  expected directives, and bash hands srun, and the environment, the spec's words byte-exact.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest
import yaml
from batch_script import step_command
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from hpcflow.slurm.render import srun_options
from hpcflow.spec.job import JobSpec, load_job_spec
from hpcflow.spec.loading import format_loc

#: HPCFLOW_HOSTILE_EXAMPLES=5000 runs a longer search (a few minutes) than CI's quick one.
SETTINGS = settings(max_examples=int(os.environ.get("HPCFLOW_HOSTILE_EXAMPLES", "120")),
                    deadline=None, database=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture,
                                           HealthCheck.too_slow])

POOL = [
    "", " ", "-", "--help", "-x", "a b", "it's", 'say "hi"', "$(touch pwned)", "`id`", "$HOME",
    "a\nb", "\x1b[31mred\x1b[0m", "A\n#SBATCH --uid=0", "../../etc", "/", ".", "\ud800", "x" * 300,
    "/r/" + "a" * 300, "%j", "a\\b", "#", "run #2", "1:30:00", "0755", "yes", "null", "~", "*",
    "SLURM_JOB_ID", "/bin/true", "pkg.mod", "0", "99999999999999999999", "torchrun", "gpu,cpu",
    "/fsx:/fsx:ro", "nvcr.io#nvidia/pytorch:24.05-py3", "\t", "é ✓", "\u202e", "5 # five",
]
NAMES = ["SLURM_JOB_ID", "SLURM_RESTART_COUNT", "SLURM_ARRAY_TASK_ID", "SLURM_JOB_NODELIST",
         "SHELLOPTS", "UID", "IFS", "HPCFLOW_RUN_DIR", "hpcflow_job_id", "PATH", "NCCL_DEBUG",
         "SBATCH_X", "OMP_NUM_THREADS", "1X", "A-B", "A\n#SBATCH --uid=0", "", "\ud800"]
FIELDS = [
    "name", "nodes", "tasks_per_node", "gpus_per_node", "cpus_per_task", "time_limit",
    "partition", "account", "run_dir", "launcher", "program.module", "program.args",
    "program.argv", "program.python", "container.image", "container.mounts",
    "preemption.signal_lead_s", "preemption.max_requeues", "checkpoint.dir", "checkpoint.keep",
    "checkpoint.interval_steps", "env", "nodse",
]
#: A field whose value another field is checked against: a problem may be reported there.
RELATED = {
    "time_limit": ["preemption.signal_lead_s"],
    "gpus_per_node": ["tasks_per_node"],
    "launcher": ["tasks_per_node"],
    "run_dir": ["checkpoint.dir"],
}

texts = st.one_of(st.sampled_from(POOL),
                  st.text(st.characters(exclude_categories=()), max_size=12))
scalars = st.one_of(texts, st.integers(-(2**80), 2**80),
                    st.sampled_from([10**20, 2**70, 10**400, 0, -1, 1, 2, 8, 90, 65536]),
                    st.booleans(), st.none(), st.floats())
values = st.one_of(scalars, st.lists(texts, max_size=4), st.dictionaries(texts, texts, max_size=3),
                   st.recursive(scalars, lambda inner: st.lists(inner, max_size=2), max_leaves=6))


@st.composite
def mutations(draw: Any) -> tuple[str, list[str], Any]:
    """(how, path, value): how is "file" or "set"."""
    field = draw(st.sampled_from(FIELDS))
    if field == "env":
        path = ["env", draw(st.one_of(st.sampled_from(NAMES), texts))]
        value = draw(st.one_of(texts, scalars))
    else:
        path = field.split(".")
        value = draw(values)
    return draw(st.sampled_from(["file", "set"])), path, value


#: Text a spec accepts in arguments and environment values: anything but NUL and surrogates.
words = st.one_of(st.sampled_from([w for w in POOL if "\ud800" not in w]),
                  st.text(st.characters(exclude_characters="\x00"), max_size=12))
safe_names = st.from_regex(r"[A-Z][A-Z0-9_]{0,8}", fullmatch=True).filter(
    lambda n: not n.startswith(("SLURM", "SBATCH", "HPCFLOW", "BASH")) and n not in
    ("IFS", "UID", "EUID", "PPID", "GROUPS", "RANDOM", "SECONDS", "LINENO", "OPTIND", "OPTARG",
     "OPTERR", "PS4", "DIRSTACK", "FUNCNAME", "PIPESTATUS", "SRANDOM", "BASHOPTS", "SHELLOPTS",
     "POSIXLY_CORRECT", "EPOCHSECONDS", "EPOCHREALTIME"))


@st.composite
def accepted(draw: Any) -> tuple[str, list[str], Any]:
    """A change the spec should accept: hostile words where any word is allowed."""
    how = draw(st.sampled_from(["file", "set"]))
    kind = draw(st.sampled_from(["env", "argv", "module", "run_dir", "torchrun", "gpus",
                                 "partition", "ckpt"]))
    if kind == "env":
        return how, ["env", draw(safe_names)], draw(words)
    if kind == "argv":
        return how, ["program"], {"argv": [draw(st.sampled_from(["/bin/echo", "echo"])),
                                           *draw(st.lists(words, max_size=4))]}
    if kind == "module":
        return how, ["program"], {"module": "pkg.train", "args": draw(st.lists(words, max_size=4)),
                                  "python": draw(st.sampled_from(["python3", "/opt/py/bin/python"]))}
    if kind == "run_dir":
        tail = draw(st.text(st.characters(exclude_characters='"%\\/', exclude_categories=("Cc",
                                                                                           "Cs")),
                            min_size=1, max_size=12))
        return how, ["run_dir"], f"/tmp/hpcflow-hostile-{tail}"
    if kind == "torchrun":
        return how, ["launcher"], "torchrun"
    if kind == "gpus":
        return how, ["gpus_per_node"], draw(st.integers(1, 8))
    if kind == "partition":
        return how, ["partition"], draw(st.from_regex(r"[a-z0-9._-]{1,8}(,[a-z]{1,4})?",
                                                       fullmatch=True))
    return how, ["checkpoint", "dir"], draw(st.sampled_from(["ck", "a/../ck", "/fsx/ck it's"]))


def base_spec(run_dir: Path) -> dict[str, Any]:
    return {"name": "hostile", "time_limit": "00:30:00", "run_dir": str(run_dir),
            "program": {"argv": ["/bin/echo", "hello"]}}


def put(data: dict[str, Any], path: list[str], value: Any) -> None:
    node = data
    for part in path[:-1]:
        child = node.get(part)
        if not isinstance(child, dict):
            child = node[part] = {}
        node = child
    node[path[-1]] = value


def flow(value: Any) -> str:
    """``value`` as a one-line YAML flow text for --set."""
    text = yaml.safe_dump(value, default_flow_style=True, width=10**9, allow_unicode=True)
    return re.sub(r"\n\.\.\.\n$", "\n", text).rstrip("\n")


def tree(*folders: Path) -> list[str]:
    return sorted(str(p) for folder in folders for p in folder.rglob("*"))


def problem_lines(output: str) -> list[str]:
    lines = []
    for line in output.splitlines():
        line = line.strip()
        line = line.removeprefix("error: ")
        if not line or re.search(r": \d+ problem\(s\) in the spec$", line):
            continue
        lines.append(line)
    return lines


def names_a_changed_field(line: str, source: str, changed: list[list[str]],
                          overrides: list[str]) -> bool:
    if line.startswith("--set "):  # an override refused as a whole names its key
        return any(item.partition("=")[0] in line or repr(item) in line for item in overrides)
    rest = line[len(source) + 2:] if line.startswith(source + ": ") else line
    candidates = set()
    for path in changed:
        candidates |= {format_loc(path[:k]) for k in range(1, len(path) + 1)}
        for related in RELATED.get(path[0], []):
            candidates.add(related)
    return any(rest.startswith(c) and rest[len(c):len(c) + 1] in (":", ".", "[")
               for c in candidates)


# ---- what an accepted spec must render to ----------------------------------------------------


def sbatch_header(script: str) -> dict[str, str | None]:
    """The #SBATCH directives sbatch reads (before the first command), values unquoted the way
    sbatch reads them: inside double quotes a backslash escapes the next character."""
    out: dict[str, str | None] = {}
    for line in script.splitlines()[1:]:
        if line and not line.startswith("#"):
            break
        if line.startswith("#SBATCH "):
            flag, eq, value = line[len("#SBATCH "):].partition("=")
            if value.startswith('"') and value.endswith('"') and len(value) >= 2:
                value = re.sub(r"\\(.)", r"\1", value[1:-1])
            assert flag not in out, f"{flag} given twice"
            out[flag] = value if eq else None
    return out


def expected_header(job: JobSpec) -> dict[str, str | None]:
    want: dict[str, str | None] = {
        "--cpus-per-task": str(job.cpus_per_task), "--job-name": job.name,
        "--nodes": str(job.nodes), "--ntasks-per-node": str(job.tasks_per_node),
        "--open-mode": "append", "--output": f"{job.run_dir}/%x-%j.out", "--requeue": None,
        "--time": job.time_limit,
    }
    if job.preemption.signal_lead_s:  # a lead of 0 (limits under 4 min): no warning at all
        want["--signal"] = f"B:{job.preemption.signal}@{job.preemption.signal_lead_s}"
    if job.gpus_per_node:
        want["--gpus-per-node"] = str(job.gpus_per_node)
    if job.partition:
        want["--partition"] = job.partition
    if job.account:
        want["--account"] = job.account
    return want


def bash_words(script: str, env_names: list[str]) -> tuple[list[bytes], list[bytes]]:
    """Run the script's environment exports in bash; returns (env values as bash has them, the
    step's argv as the supervisor starts it from the script's settings)."""
    exports = script[script.index("# ---- Settings from the job spec"):
                     script.index("# ---- The attempt.")]
    program = "\n".join([
        exports,
        'for hpcflow_t_name in "$@"; do printf \'%s\\0\' "${!hpcflow_t_name}"; done',
    ])
    out = subprocess.run(["bash", "-c", program, "bash", *env_names], capture_output=True,
                         check=False, timeout=30)
    assert out.returncode == 0, out.stderr
    words = out.stdout.split(b"\0")[:-1]
    argv = [w.encode() for w in step_command(script, host="h", job_id="1", nnodes="2")[1:]]
    return words, argv


def check_script(script: bytes, job: JobSpec, tmp: Path) -> None:
    text = script.decode("utf-8")
    path = tmp / "check.sbatch"
    path.write_bytes(script)
    try:
        syntax = subprocess.run(["bash", "-n", str(path)], capture_output=True, check=False)
    finally:
        path.unlink()
    assert syntax.returncode == 0, syntax.stderr
    assert sbatch_header(text) == expected_header(job)
    names = sorted(job.env)
    env_values, argv = bash_words(text, names)
    assert env_values == [job.env[n].encode() for n in names]
    python = job.program.python or sys.executable
    prog = job.program
    if job.launcher == "srun":
        program = [python, "-m", prog.module, *prog.args] if prog.module else list(prog.argv or [])
    else:
        program = ["-m", prog.module, *prog.args] if prog.module else ["--no-python", *prog.argv]
        assert argv[len(srun_options(job)):][:3] == [python.encode(), b"-m",
                                                     b"torch.distributed.run"]
    assert argv[: len(srun_options(job))] == [w.encode() for w in srun_options(job)]
    assert argv[-len(program):] == [w.encode() for w in program]


# ---- the properties ----------------------------------------------------------------------------


@pytest.fixture
def scratch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    monkeypatch.setenv("HPCFLOW_HOME", str(tmp_path / "home"))
    (tmp_path / "specs").mkdir()
    (tmp_path / "runs").mkdir()
    return {"specs": tmp_path / "specs", "runs": tmp_path / "runs", "home": tmp_path / "home"}


@SETTINGS
@given(changes=st.lists(st.one_of(mutations(), accepted(), accepted()), min_size=1, max_size=3))
def test_hostile_specs_are_refused_cleanly_or_render_exactly(slurm, hpcflow, scratch, changes):
    with tempfile.TemporaryDirectory(dir=scratch["specs"]) as folder:
        folder_path = Path(folder)
        spec_path = folder_path / "job.yaml"
        data = base_spec(scratch["runs"] / "run")
        overrides = []
        for how, path, value in changes:
            if how == "file":
                put(data, path, value)
            else:
                overrides.append(f"{'.'.join(path)}={flow(value)}")
        spec_path.write_text(yaml.safe_dump(data, allow_unicode=True), encoding="utf-8")
        before = tree(scratch["runs"], scratch["specs"])
        args = ["submit", "--dry-run", str(spec_path)]
        for item in overrides:
            args += ["--set", item]
        result = hpcflow(*args)
        event(f"exit {result.exit_code}")

        assert result.exit_code in (0, 2, 3), result.output
        assert tree(scratch["runs"], scratch["specs"]) == before
        assert not scratch["home"].exists()
        if result.exit_code == 3:
            assert result.output.startswith("error: run_dir: "), result.output
        elif result.exit_code == 2:
            lines = problem_lines(result.output)
            assert lines, result.output
            changed = [path for _, path, _ in changes]
            for line in lines:
                assert names_a_changed_field(line, str(spec_path), changed, overrides), \
                    f"{line!r} names no changed field ({changed}, {overrides})"
                assert "\x1b" not in line and "\n" not in line
        else:
            job = load_job_spec(spec_path, overrides)
            check_script(result.stdout_bytes, job, folder_path)


def bomb_text(levels: int, width: int, key: str) -> str:
    lines = [f'{key}: &a0 ["lol"]']
    for i in range(1, levels + 1):
        lines.append(f"k{i}: &a{i} [{', '.join([f'*a{i - 1}'] * width)}]")
    return "\n".join(lines) + "\n"


@SETTINGS
@given(kind=st.sampled_from(["bomb", "recursive", "deep", "deep-set"]),
       levels=st.integers(6, 12), width=st.integers(5, 12),
       depth=st.integers(33, 5000), key=st.sampled_from(["env", "program", "x"]))
def test_hostile_yaml_files_are_refused_quickly_naming_the_file(slurm, hpcflow, scratch, kind,
                                                                levels, width, depth, key):
    spec_path = scratch["specs"] / "job.yaml"
    base = yaml.safe_dump(base_spec(scratch["runs"] / "run"))
    args: list[str] = []
    if kind == "bomb":
        text = base + bomb_text(levels, width, key)
        needle = "anchors and aliases"
    elif kind == "recursive":
        text = base + f"{key}: &r {{a: [*r]}}\n"
        needle = "used inside itself"
    elif kind == "deep":
        text = base + f"{key}: " + "[" * depth + "]" * depth + "\n"
        needle = "nested deeper than"
    else:
        text = base
        args = ["--set", f"{key}.x=" + "[" * depth + "]" * depth]
        needle = "nested deeper than"
    spec_path.write_text(text)
    before = tree(scratch["runs"], scratch["specs"])
    result = hpcflow("submit", "--dry-run", str(spec_path), *args)
    assert result.exit_code == 2, result.output
    assert needle in result.output
    assert (str(spec_path) if kind != "deep-set" else f"--set {key}.x") in result.output
    assert tree(scratch["runs"], scratch["specs"]) == before
    assert len(result.output) < 2000


def test_the_property_harness_accepts_a_plain_spec(slurm, hpcflow, scratch):
    """The checks above are not vacuous: a valid spec with hostile words renders and passes."""
    spec_path = scratch["specs"] / "job.yaml"
    data = base_spec(scratch["runs"] / "run")
    data["program"]["argv"] += ["it's", "$(x)", "a\nb", "\x1b[0m", ""]
    data["env"] = {"ODD": "'; rm -rf / #\n$(id)", "COLOR": "\x1b[31m"}
    data["gpus_per_node"] = 2
    spec_path.write_text(yaml.safe_dump(data, allow_unicode=True))
    result = hpcflow("submit", "--dry-run", str(spec_path), "--set", "env.NOTE=run #2")
    assert result.exit_code == 0, result.output
    job = load_job_spec(spec_path, ["env.NOTE=run #2"])
    assert job.env["NOTE"] == "run #2" and job.tasks_per_node == 2
    check_script(result.stdout_bytes, job, scratch["specs"])
    with pytest.raises(AssertionError):  # a header that differs is caught
        check_script(result.stdout_bytes.replace(b"--nodes=1", b"--nodes=2"), job, scratch["specs"])
    with pytest.raises(AssertionError):  # a word that differs is caught
        check_script(result.stdout_bytes.replace(b"it'\"'\"'s", b"it s"), job, scratch["specs"])
    assert os.environ["HPCFLOW_HOME"] == str(scratch["home"])
