"""``python -m hpcflow.examples.train --model lm`` as a real single process: a layout that does not
fit the job exits 2 before any training, and a run on a text file writes its metrics."""

from __future__ import annotations

import json
import math
import re
import subprocess
import sys

import pytest
from runtime_launch import base_env

pytestmark = [pytest.mark.dist, pytest.mark.timeout(120)]

TRAIN = [sys.executable, "-m", "hpcflow.examples.train", "--model", "lm"]


def run(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess:
    print("$", " ".join(TRAIN + args))
    return subprocess.run(TRAIN + args, env=env, capture_output=True, text=True, timeout=90)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        pytest.param(["--tp", "2"], r"dp=-1 needs pp \* tp = 1 \* 2 = 2 to divide the world size 1",
                     id="no-ranks-left-for-dp"),
        pytest.param(["--pp", "2", "--dp", "1"], r"dp \* pp \* tp = 1 \* 2 \* 1 = 2, but the world size is 1",
                     id="product"),
        pytest.param(["--batch-size", "3", "--microbatches", "2"],
                     "2 micro-batches do not divide the batch of 3 sequences per dp rank", id="microbatches"),
        pytest.param(["--seq-len", "4096"], "--seq-len 4096 exceeds the model's 256", id="seq-len"),
    ],
)
def test_a_configuration_that_does_not_fit_exits_2_with_the_rule(args, message):
    result = run(args, base_env())
    assert result.returncode == 2, result.stdout + result.stderr
    assert re.search(message, result.stderr), result.stderr
    assert "hpcflow-step" not in result.stdout


def test_single_process_trains_on_a_text_file_and_appends_metrics(tmp_path):
    text = tmp_path / "corpus.txt"
    text.write_text("the quick brown fox jumps over the lazy dog\n" * 200)
    env = {**base_env(), "HPCFLOW_RUN_DIR": str(tmp_path / "run")}
    result = run(["--data", str(text), "--steps", "3", "--batch-size", "2", "--seq-len", "16"], env)
    assert result.returncode == 0, result.stdout + result.stderr
    layout = [json.loads(line.split(" ", 1)[1]) for line in result.stdout.splitlines()
              if line.startswith("hpcflow-layout ")][0]
    assert layout["layout"] == {"pp": 1, "dp": 1, "tp": 1} and layout["data_files"] == 1
    records = [json.loads(x) for x in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in records] == [1, 2, 3]
    assert all(math.isfinite(r["loss"]) and r["tokens"] == 2 * 16 for r in records)
