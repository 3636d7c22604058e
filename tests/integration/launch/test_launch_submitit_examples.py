"""submitit's own examples (README: ``add`` and ``map_array``; docs/checkpointing.md: a
``Checkpointable`` class) run through hpcflow's executor with only the import line changed, on
submitit's local executor and on the local Slurm cluster, and give the results plain submitit
gives. On Slurm, a Checkpointable preempted by the warning signal is checkpointed by rank 0 as
submitit would, requeued by hpcflow's batch script, and finishes from its stored state.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

# The README's code (submitit 1.5 README.md, "Quick start"), with the cluster's partition and
# the folder given from outside; CLUSTER is "local" or "slurm".
README = textwrap.dedent('''
    import submitit

    def add(a, b):
        return a + b

    executor = submitit.AutoExecutor(folder=FOLDER, cluster=CLUSTER)
    executor.update_parameters(timeout_min=2)
    job = executor.submit(add, 5, 7)
    output = job.result()
    assert output == 12

    a = [1, 2, 3, 4]
    b = [10, 20, 30, 40]
    jobs = executor.map_array(add, a, b)
    results = [job.result() for job in jobs]

    import checkpoint_example
    ckjob = executor.submit(checkpoint_example.Counter(), 5)
    print("RESULTS", [output, results, ckjob.result()])
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


def run_example(tmp_path, import_line: str, cluster: str) -> str:  # noqa: ANN001
    tmp_path.mkdir(parents=True, exist_ok=True)
    (tmp_path / "checkpoint_example.py").write_text(
        CHECKPOINT_EXAMPLE.replace("import submitit", import_line))
    code = (f"FOLDER = {str(tmp_path / 'log_test')!r}\nCLUSTER = {cluster!r}\n"
            + README.replace("import submitit", import_line))
    (tmp_path / "readme.py").write_text(code)
    proc = subprocess.run([sys.executable, "readme.py"], cwd=tmp_path, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return next(line for line in proc.stdout.splitlines() if line.startswith("RESULTS"))


EXPECTED = "RESULTS [12, [11, 22, 33, 44], {'done': 5, 'starts': [0]}]"


def test_readme_examples_on_submitit_local_executor_match_plain_submitit(tmp_path, launch_env):
    plain = run_example(tmp_path / "plain", "import submitit", "local")
    ours = run_example(tmp_path / "ours", "import hpcflow.launch as submitit", "local")
    assert plain == ours == EXPECTED


@pytest.mark.slurm
@pytest.mark.timeout(600)
def test_readme_examples_on_slurm_give_the_same_results(launch_cluster, launch_env, tmp_path):
    assert run_example(tmp_path / "slurm", "import hpcflow.launch as submitit", "slurm") == EXPECTED
