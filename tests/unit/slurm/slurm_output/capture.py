"""Capture real Slurm output for the parser and client tests.

Run against a live cluster (``hpcflow local-cluster up``), from any directory:

    python tests/unit/slurm/slurm_output/capture.py

It submits a few short jobs of its own (pending, running, array, requeued, failed, cancelled,
odd names and paths), records every command the client runs as ``<case>.json`` beside this file
(argv, exit status, stdout, stderr) and cancels its jobs at the end. Paths under the temporary
folder are replaced by ``/scratch/capture`` so the records do not depend on where they were made.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from hpcflow.command import run_command, run_until_line
from hpcflow.slurm.client import SCANCEL_RETRY_RE, SlurmClient

HERE = Path(__file__).parent
TOKEN = "/scratch/capture"


def wait_running(client: SlurmClient, job_id: str, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if any(e.state == "RUNNING" for e in client.queue([job_id])):
            return
        time.sleep(1)
    raise SystemExit(f"job {job_id} did not start within {timeout_s} s; is the cluster busy?")


def main() -> int:
    tmp = Path(tempfile.mkdtemp(prefix="hpcflow-capture-"))
    os.chdir(tmp)  # job logs and WorkDir= land in the temporary folder
    records: dict[str, dict] = {}
    current = {"case": ""}

    def recording_runner(argv, *, input=None, timeout_s=60.0):
        if argv[0] == "scancel" and "-v" in argv:  # what the client does with the default runner
            result = run_until_line(argv, SCANCEL_RETRY_RE, timeout_s=timeout_s)
        else:
            result = run_command(argv, input=input, timeout_s=timeout_s)
        if not current["case"]:
            return result
        records[current["case"]] = {
            "argv": [str(a).replace(str(tmp), TOKEN) for a in argv],
            "returncode": result.returncode,
            "stdout": result.stdout.replace(str(tmp), TOKEN),
            "stderr": result.stderr.replace(str(tmp), TOKEN),
            "slurm": subprocess.run(["sinfo", "--version"], capture_output=True, text=True).stdout.strip(),
        }
        return result

    client = SlurmClient(recording_runner, attempts=1)
    mine: list[str] = []

    def case(name, fn, *args, **kwargs):
        current["case"] = name
        try:
            return fn(*args, **kwargs)
        except Exception as exc:  # recorded anyway; the tests check what the client does with it
            print(f"{name}: {type(exc).__name__}: {exc}", file=sys.stderr)
            return None
        finally:
            current["case"] = ""

    def script(name: str, body: str, *sbatch: str, folder: Path = tmp) -> Path:
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / name
        lines = ["#!/bin/bash", *(f"#SBATCH {s}" for s in sbatch), body, ""]
        path.write_text("\n".join(lines))
        return path

    odd = tmp / "dir with space"
    running = case("sbatch_ok", client.submit,
                   script("run.sh", "sleep 90", "--requeue", "-J hpcflow-cap-run", "-t 10",
                          f"--output={tmp}/%x-%j.out", "--open-mode=append",
                          "--signal=B:USR1@120"), chdir=tmp)
    mine.append(running)
    case("sbatch_bad_partition", client.submit,
         script("bad.sh", "true", "--partition=nosuch"))
    spacey = case("sbatch_spaces", client.submit,
                  script("my job.sh", "sleep 90", '--comment="a comment with spaces"',
                         '-J "name with space|pipe"', folder=odd), chdir=odd)
    mine.append(spacey)
    array = client.submit(script("array.sh", "sleep 60", "--array=1-3", "-J hpcflow-cap-array"))
    failed = client.submit(script("fail.sh", "exit 3", "-J hpcflow-cap-fail"))
    done = client.submit(script("done.sh", "true", "-J hpcflow-cap-done"))
    requeued = client.submit(script("rq.sh", "sleep 90", "--requeue", "-J hpcflow-cap-rq"))
    mine += [array, failed, done, requeued]
    wait_running(client, requeued)
    case("scontrol_requeue_ok", client.requeue, requeued)
    big = client.submit(script("big.sh", "sleep 5", "-N 2", "-J hpcflow-cap-big"))
    cancelled = client.submit(script("cxl.sh", "sleep 60", "-J hpcflow-cap-cxl"))
    mine += [big, cancelled]
    time.sleep(2)
    case("scancel_ok", client.cancel, cancelled)
    time.sleep(2)
    case("squeue_mine", client.queue, mine)
    case("squeue_unknown", client.queue, ["99999"])
    case("squeue_all", client.queue)
    case("scontrol_show_running", client.show_job, running)
    case("scontrol_show_spaces", client.show_job, spacey)
    case("scontrol_show_requeued", client.show_job, requeued)
    case("scontrol_show_failed", client.show_job, failed)
    case("scontrol_show_completed", client.show_job, done)
    case("scontrol_show_array", client.show_job, array)
    case("scontrol_show_array_element", client.show_job, f"{array}_2")
    case("scontrol_show_invalid", client.show_job, "99999")
    case("scontrol_requeue_invalid", client.requeue, "99999")
    case("sacct_disabled", client.accounting, running)
    # Held jobs: submitted held (JobHeldUser), and requeued in held state from running.
    held = client.submit(script("held.sh", "sleep 30", "--hold", "-J hpcflow-cap-held"))
    rqheld = client.submit(script("rqheld.sh", "sleep 30", "--requeue", "-J hpcflow-cap-rqhold"))
    mine += [held, rqheld]
    wait_running(client, rqheld)
    subprocess.run(["scontrol", "requeuehold", rqheld], check=True)
    time.sleep(2)
    case("squeue_held", client.queue, [held])
    case("scontrol_show_held", client.show_job, held)
    case("squeue_requeue_held", client.queue, [rqheld])
    case("scontrol_show_requeue_held", client.show_job, rqheld)
    case("scancel_unknown", client.cancel, "99999")
    case("scancel_signal_batch", client.cancel, running, signal="USR1", batch_only=True)
    # A pending job cannot be signalled: scancel says it is in a transitional state and would
    # retry (stopped there).
    case("scancel_signal_transition", client.cancel, held, signal="USR1", batch_only=True)
    for job in mine:
        subprocess.run(["scancel", job], check=False)
    for name, record in records.items():
        (HERE / f"{name}.json").write_text(json.dumps(record, indent=1) + "\n")
    print(f"wrote {len(records)} records to {HERE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
