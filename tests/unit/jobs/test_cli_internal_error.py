"""An exception hpcflow did not expect is reported as a bug in one line, not as a traceback."""

from __future__ import annotations

import json
from typing import Any

from hpcflow.jobs import service


def test_an_unexpected_exception_is_reported_without_traceback(slurm, hpcflow, monkeypatch):
    def boom(*_a: Any, **_k: Any) -> None:
        raise ZeroDivisionError("division by zero")

    monkeypatch.setattr(service, "list_jobs", boom)
    result = hpcflow("list")
    assert result.exit_code == 1
    assert "internal error (ZeroDivisionError: division by zero)" in result.output
    assert "--debug" in result.output and "Traceback" not in result.output
    as_json = hpcflow("list", "--json")
    assert json.loads(as_json.output)["error"]["type"] == "InternalError"
