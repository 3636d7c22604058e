"""Pickling problems are refused at submission, naming the culprit and the fix."""

from __future__ import annotations

import socket
import sys
import types

import pytest
from submitit.core.utils import DelayedSubmission

from hpcflow.errors import SubmitError
from hpcflow.launch.pickling import check_picklable


def test_lambda_and_closure_over_plain_values_pass():
    k = 3
    fn = lambda x: x + k  # noqa: E731
    check_picklable(DelayedSubmission(fn, 1), fn)


def test_closure_over_a_socket_names_the_variable_and_the_fix():
    conn = socket.socket()
    try:
        def send(x):
            return conn.send(x)

        with pytest.raises(SubmitError) as info:
            check_picklable(DelayedSubmission(send, b"x"), send)
    finally:
        conn.close()
    text = str(info.value)
    assert "closure variable 'conn'" in text and "socket.socket" in text
    assert "create it inside the function" in text


def test_argument_that_cannot_be_pickled_is_named():
    lock = __import__("threading").Lock()
    with pytest.raises(SubmitError, match=r"keyword argument 'guard' \(_thread.lock\)"):
        check_picklable(DelayedSubmission(print, guard=lock), print)


def test_module_the_nodes_cannot_import_is_named(tmp_path, monkeypatch):
    mod = types.ModuleType("only_here_mod")
    mod.__file__ = str(tmp_path / "only_here_mod.py")
    exec("def f():\n    return 1\n", mod.__dict__)  # noqa: S102
    mod.f.__module__ = "only_here_mod"
    monkeypatch.setitem(sys.modules, "only_here_mod", mod)
    with pytest.raises(SubmitError) as info:
        check_picklable(DelayedSubmission(mod.f), mod.f)
    assert "module 'only_here_mod'" in str(info.value) and "PYTHONPATH" in str(info.value)
