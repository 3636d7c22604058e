"""submitit's own examples run through hpcflow's executor with only the import line changed
(``import hpcflow.launch as submitit``), on submitit's local executor (no Slurm on PATH) and on
the local Slurm cluster, and give what plain submitit gives there: the README's quick start
verbatim (a 1-minute job in partition ``dev``), the job-array example of docs/examples.md, and a
``Checkpointable`` class (docs/checkpointing.md). On Slurm, a Checkpointable preempted by the
warning signal is checkpointed by rank 0 as submitit would, requeued by hpcflow's batch script,
and finishes from its stored state.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

# submitit 1.5 README.md, "An example is worth a thousand words", character for character.
README = textwrap.dedent('''
    import submitit

    def add(a, b):
        return a + b

    # executor is the submission interface (logs are dumped in the folder)
    executor = submitit.AutoExecutor(folder="log_test")
    # set timeout in min, and partition for running the job
    executor.update_parameters(timeout_min=1, slurm_partition="dev")
    job = executor.submit(add, 5, 7)  # will compute add(5, 7)
    print(job.job_id)  # ID of your job

    output = job.result()  # waits for completion and returns output
    assert output == 12  # 5 + 7 = 12...  your addition was computed in the cluster
''')

# submitit 1.5 docs/examples.md, "Job arrays", verbatim; it takes ``log_folder`` and ``add`` from
# the page's earlier examples.
MAP_ARRAY = textwrap.dedent('''
    a = [1, 2, 3, 4]
    b = [10, 20, 30, 40]
    executor = submitit.AutoExecutor(folder=log_folder)
    # the following line tells the scheduler to only run\\
    # at most 2 jobs at once. By default, this is several hundreds
    executor.update_parameters(slurm_array_parallelism=2)
    jobs = executor.map_array(add, a, b)  # just a list of jobs
''')

# What the test adds after the examples: the checkpointing example, and one line to compare.
TAIL = textwrap.dedent('''
    import checkpoint_example
    ckjob = executor.submit(checkpoint_example.Counter(), 5)
    print("RESULTS", [output, [job.result() for job in jobs], ckjob.result()])
''')

CHECKPOINT_EXAMPLE = textwrap.dedent('''
    import time
    import submitit

    class Counter(submitit.helpers.Checkpointable):
        """Counts to n, one step at a time; its state is itself (docs/checkpointing.md)."""

        def __init__(self):
            self.done = 0
            self.starts = []

        def __call__(self, n, step_s=0.0):
            self.starts.append(self.done)
            while self.done < n:
                time.sleep(step_s)
                self.done += 1
            return {"done": self.done, "starts": self.starts}
''')


#: What a job needs from PATH, less every Slurm command: with no sbatch and no srun, submitit and
#: hpcflow.launch both take submitit's local executor.
SLURM_COMMANDS = {"sbatch", "srun", "salloc", "squeue", "scontrol", "scancel", "sinfo", "sacct"}


def path_without_slurm(bin_dir: Path) -> str:
    """A PATH with every command of this one but Slurm's: the first of each name, linked."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    for folder in [os.path.dirname(sys.executable), *os.environ["PATH"].split(os.pathsep)]:
        if not os.path.isdir(folder):
            continue
        for entry in os.scandir(folder):
            link = bin_dir / entry.name
            if entry.name not in SLURM_COMMANDS and not link.exists() and not link.is_symlink():
                link.symlink_to(entry.path)
    return str(bin_dir)


def run_example(tmp_path: Path, import_line: str, slurm: bool) -> tuple[str, str]:
    """Run the examples with ``import_line`` in ``tmp_path``; returns (README's printed job id,
    the RESULTS line)."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    (tmp_path / "checkpoint_example.py").write_text(
        CHECKPOINT_EXAMPLE.replace("import submitit", import_line))
    code = README + 'log_folder = "log_test"\n' + MAP_ARRAY + TAIL
    (tmp_path / "readme.py").write_text(code.replace("import submitit", import_line, 1))
    env = dict(os.environ)
    if not slurm:
        env["PATH"] = path_without_slurm(tmp_path.parent / f"bin-{tmp_path.name}")
    proc = subprocess.run([sys.executable, "readme.py"], cwd=tmp_path, capture_output=True,
                          text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    return lines[0], next(line for line in lines if line.startswith("RESULTS"))


EXPECTED = "RESULTS [12, [11, 22, 33, 44], {'done': 5, 'starts': [0]}]"


def test_readme_examples_on_submitit_local_executor_match_plain_submitit(tmp_path, launch_env):
    plain_id, plain = run_example(tmp_path / "plain", "import submitit", slurm=False)
    ours_id, ours = run_example(tmp_path / "ours", "import hpcflow.launch as submitit", slurm=False)
    assert plain == ours == EXPECTED
    assert plain_id.isdigit() and ours_id.isdigit()  # submitit's local job ids are pids
    # submitit's local executor ran them: no hpcflow run directory (no batch script)
    assert not list((tmp_path / "ours" / "log_test").glob("add-*"))


@pytest.mark.slurm
@pytest.mark.timeout(600)
def test_readme_examples_on_slurm_give_what_plain_submitit_gives(launch_cluster, launch_env,
                                                                  tmp_path):
    plain_id, plain = run_example(tmp_path / "plain", "import submitit", slurm=True)
    ours_id, ours = run_example(tmp_path / "ours", "import hpcflow.launch as submitit",
                                slurm=True)
    assert plain == ours == EXPECTED
    assert re.fullmatch(r"[0-9]+", plain_id) and re.fullmatch(r"[0-9]+", ours_id)
    # The 1-minute job ran in partition dev without hpcflow's warning, and its log says so once.
    [log_path] = (tmp_path / "ours" / "log_test").glob(f"add-*/add-{ours_id}.out")
    script = (log_path.parent / "job.sbatch").read_text()
    assert "#SBATCH --partition=dev\n" in script and "#SBATCH --time=00:01:00\n" in script
    assert "#SBATCH --signal" not in script
    log = log_path.read_text()
    assert log.count("preemption.signal_lead_s is 0): at the limit Slurm ends the job") == 1
    for job_id in (plain_id, ours_id):  # known to scontrol for MinJobAge (600 s) after the end
        shown = subprocess.run(["scontrol", "show", "job", job_id], capture_output=True,
                               text=True).stdout
        assert "Partition=dev " in shown, shown
