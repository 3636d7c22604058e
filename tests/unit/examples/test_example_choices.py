"""The example program's choices live without torch, and agree with the modules that use them."""

from __future__ import annotations

import subprocess
import sys


def test_the_command_line_is_parsed_without_importing_torch_or_numpy():
    code = ("import sys\n"
            "from hpcflow.examples.train import parse_args\n"
            "args = parse_args(['--steps', '3', '--model', 'lm', '--model-size', 'small'])\n"
            "print(args.steps, args.model_size, 'torch' in sys.modules, 'numpy' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=60).stdout
    assert out.split() == ["3", "small", "False", "False"]


def test_a_bad_argument_is_refused_before_the_heavy_imports():
    code = ("import sys\n"
            "from hpcflow.examples.train import parse_args\n"
            "try:\n"
            "    parse_args(['--steps', '0'])\n"
            "except SystemExit as exc:\n"
            "    print(exc.code, 'torch' in sys.modules)\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True, timeout=60)
    assert proc.stdout.split() == ["2", "False"]
    assert "--steps must be at least 1" in proc.stderr


def test_the_model_sizes_are_the_presets_names():
    from hpcflow.examples import choices, lm

    assert set(choices.MODEL_SIZES) == set(lm.PRESETS)
