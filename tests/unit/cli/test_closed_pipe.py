"""A reader that leaves early (``hpcflow report J | head``) ends the command quietly.

Real pipes: the command's stdout is a pipe whose reader has already exited, so every write
fails with EPIPE. The command must end with SIGPIPE's status as a shell reports it (141) and
say nothing on stderr (no "internal error (BrokenPipeError)", no traceback).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]


def _closed_pipe_run(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    # `true` exits at once, before the interpreter has imported anything: the pipe is closed
    # by the time hpcflow writes its first byte.
    script = f"{sys.executable} -m hpcflow {' '.join(args)} 2>\"$ERR\" | true; " \
             'echo "${PIPESTATUS[0]}"; cat "$ERR"'
    return subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=120,
                          env=env)


def test_report_into_a_closed_pipe_exits_141_silently(tmp_path: Path) -> None:
    home, run = tmp_path / "home", tmp_path / "run"
    (run / ".hpcflow").mkdir(parents=True)
    home.mkdir()
    t = time.time() - 100
    events = [{"event": "attempt_start", "time": t + 5, "job_id": "9", "restart": 0},
              {"event": "step_end", "time": t + 40, "job_id": "9", "restart": 0, "rc": 0},
              {"event": "job_end", "time": t + 40, "job_id": "9", "restart": 0, "rc": 0,
               "reason": "completed"}]
    (run / ".hpcflow" / "events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
    (home / "jobs.jsonl").write_text(json.dumps(
        {"job_id": "9", "name": "j", "run_dir": str(run), "submitted_at": t}) + "\n")
    env = {**os.environ, "HPCFLOW_HOME": str(home), "PYTHONPATH": str(REPO),
           "ERR": str(tmp_path / "stderr")}
    proc = _closed_pipe_run(["report", "9"], env)
    status, _, stderr = proc.stdout.partition("\n")
    assert status == "141", proc.stdout
    assert stderr == "", stderr
    # The same command into an open pipe prints the table: the silence above is the pipe's.
    open_pipe = subprocess.run([sys.executable, "-m", "hpcflow", "report", "9"], env=env,
                               capture_output=True, text=True, timeout=120)
    assert open_pipe.returncode == 0 and "goodput" in open_pipe.stdout
