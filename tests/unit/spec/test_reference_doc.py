"""docs/job-spec.md is generated from JobSpec; this test keeps the two equal
(HPCFLOW_REGEN_GOLDEN=1 rewrites the doc)."""

import difflib
import os
from pathlib import Path

from hpcflow.spec.job import JobSpec
from hpcflow.spec.job_fields import (
    DEFAULT_SIGNAL_LEAD_S,
    MIN_RUN_BEFORE_WARNING_S,
    MIN_SIGNAL_LEAD_S,
    MIN_TIME_BEFORE_WARNING_S,
    SIGNAL_JITTER_S,
)
from hpcflow.spec.job_parts import SHORTEST_DEFAULT_LIMIT_S
from hpcflow.spec.loading import MAX_SPEC_BYTES, MAX_SPEC_DEPTH, MAX_SPEC_NODES
from hpcflow.spec.reference import reference_markdown

HOUR_MOST = 3600 - MIN_TIME_BEFORE_WARNING_S  # the longest lead of a one-hour job
SHORTEST = SHORTEST_DEFAULT_LIMIT_S
GAP, LEAD = MIN_TIME_BEFORE_WARNING_S, DEFAULT_SIGNAL_LEAD_S
DOC = Path(__file__).resolve().parents[3] / "docs" / "job-spec.md"
INTRO = f"""
A job spec is a YAML file that `hpcflow submit` validates, renders into a batch script and
submits. Unknown fields are refused, and every invalid value is reported with its field path,
the value and what is allowed, before anything is written. Override any field from the command
line with `--set path=value` (`--set nodes=4 --set preemption.max_requeues=5`). Example:
`examples/tiny-dp.yaml`. How the preemption fields are used: `docs/protocol.md`.

A spec file is read up to {MAX_SPEC_BYTES // 1024} KiB and may hold at most {MAX_SPEC_NODES:,} values
once YAML anchors and aliases are expanded, nested at most {MAX_SPEC_DEPTH} levels deep; an anchor
used inside itself is refused. A `--set` value keeps its whole text after ` #` (it is not a YAML
comment). The limits column says what each field allows; `tasks_per_node` must equal
`gpus_per_node` when GPUs are given.

This page is generated from the model (`hpcflow.spec.job.JobSpec`).

## Where env values are written

- A literal value (`env: {{MODE: fast}}`) is written into `job.yaml` (the resolved spec, mode
  0600) and `job.sbatch` (the batch script, mode 0700), both in the run directory (mode 0700, as
  is its `.hpcflow/`), whatever the umask; `--dry-run` prints it. Slurm keeps a copy of the
  batch script (scontrol(1), `write batch_script`: the job's owner and Slurm's
  administrators can read it back), and the job's processes see it in their environment.
- A value read from a file (`env: {{WANDB_API_KEY: {{from_file: ~/.wandb_key}}}}`) is written
  nowhere by hpcflow: `job.yaml`, `job.sbatch` and `--dry-run` hold the file's path (`~`
  expanded at submit), and `--dry-run --json` lists it under `env` as
  `****** (read at run time from PATH)`. The batch script reads
  the file when the job starts, on its first node, with trailing newlines dropped, and exports
  it to the job's processes. A missing, unreadable or non-regular file stops the job with exit 1
  and the log line `env.NAME: cannot read PATH ...` before the program starts. Keep the file
  mode 0600.

## The warning lead and the time limit

Slurm sends the warning (`--signal`) up to {SIGNAL_JITTER_S} s earlier than `preemption.signal_lead_s` asks
(sbatch(1), `--signal`), so it may come as early as `time_limit - signal_lead_s - {SIGNAL_JITTER_S}` s into
an attempt. That moment must leave the job {MIN_RUN_BEFORE_WARNING_S} s to start and train: a lead needs
`time_limit - signal_lead_s >= {GAP}` s (with a one-hour limit, at most {HOUR_MOST} s), or the
warning could come at the start of every attempt and a job that joins the protocol would save and
requeue without training. A lead that breaks this is refused, as is one under {MIN_SIGNAL_LEAD_S} s other
than 0. A spec that leaves the lead out gets {LEAD} s when its time limit is at least {SHORTEST} s,
and no warning (lead 0) below that: no `--signal`, no checkpoint and requeue when time runs
out, and one line in the job log that says so.

## Who can write the run directory

`submit` and `submit --dry-run` refuse (exit 3) a `run_dir`, `checkpoint.dir` or
`program.workdir` (the ranks import from it) that exists and is not yours, or whose existing
folders (itself or a parent) are owned by someone other than you or root, or are writable by
others or by a group other than your private one (the group named after you, with no other
member) without the sticky bit (`/tmp` is fine): whoever can write there can plant a checkpoint,
which runs code as you when it is loaded, or swap the ledger for a symlink. A `.hpcflow/`,
ledger, `submissions.jsonl`, `job.yaml` or `job.sbatch` that is a symlink, not yours, or not a
folder / regular file, or a `.hpcflow/` that anyone can write, is refused even with
`--allow-shared-dir`.

`--allow-shared-dir` (a shared project folder) skips the owner and mode checks of `run_dir`,
`checkpoint.dir`, `program.workdir` and the folders above them at submit, and of `run_dir` and
`checkpoint.dir` at each attempt's start, and leaves an existing run directory's mode alone;
`.hpcflow/` is still made 0700 and yours, and the files above are still checked. It trusts
everyone who can write those folders (or rename what is in them) with your account, for as long
as the job can run: they can plant or replace a checkpoint, which is unpickled as you when it is
loaded; put modules in `program.workdir` that your ranks import; and rename `.hpcflow/` after
the checks and put their own in its place, so that the ledger, the flag files and the warm
standby's go file are theirs: the next try takes its environment from that go file, and a value
there (an `LD_PRELOAD` for the processes it starts, a checkpoint folder of theirs) runs their
code as you. Use it only for a folder whose writers you would give your login.

The run directory and its missing parents are made one level at a time, each mode 0700
whatever the umask, and each level is judged as it is reached (the folder opened, not its name
looked up again): a folder someone else made or linked in after the checks is refused. Every
attempt, the first and each requeue, checks the run directory, the checkpoint folder and the
state files again before any step runs; a folder swapped since submit ends the attempt with
exit 1 and the log line `the run directory is not safe at this attempt's start`, and nothing is
written into it but the supervisor's answer.
"""


def test_job_spec_doc_matches_the_model():
    want = reference_markdown(JobSpec, "Job spec reference", INTRO)
    if os.environ.get("HPCFLOW_REGEN_GOLDEN") == "1":
        DOC.write_text(want)
    have = DOC.read_text() if DOC.exists() else ""
    diff = "".join(difflib.unified_diff(have.splitlines(True), want.splitlines(True),
                                        "docs/job-spec.md", "generated"))
    assert not diff, f"docs/job-spec.md is stale; rerun with HPCFLOW_REGEN_GOLDEN=1\n{diff}"


def test_every_field_is_documented():
    text = reference_markdown(JobSpec, "x")
    for name in ("name", "nodes", "program.module", "preemption.signal_lead_s",
                 "checkpoint.interval_steps", "container.image"):
        assert f"| `{name}` |" in text
    rows = [line for line in text.splitlines() if line.startswith("| `")]
    assert rows and all(row.rstrip(" |").split("|")[-1].strip() for row in rows)  # a meaning each


def test_a_mapping_value_model_is_one_entry_not_a_field_of_the_mapping():
    """`env` is a mapping NAME -> text or {from_file: PATH}: the table of the mapping form says
    `env.<NAME>.from_file`, never `env.from_file` (which reads as a required field of `env`)."""
    text = reference_markdown(JobSpec, "Job spec")
    assert "`env.from_file`" not in text
    assert "## `env.<NAME>`" in text
    assert "| `env.<NAME>.from_file` | **required** |" in text
    assert "When an entry's value is a mapping: an ``env`` value read at run time" in text
