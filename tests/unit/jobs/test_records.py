"""Run-directory records: atomic files, torn ledger lines ignored, per-user index lookups."""

import json

from hpcflow.jobs import records


def test_write_atomic_leaves_no_temp_file(tmp_path):
    target = tmp_path / "a" / "job.yaml"
    records.write_atomic(target, "x: 1\n")
    records.write_atomic(target, "x: 2\n")
    assert target.read_text() == "x: 2\n"
    assert [p.name for p in target.parent.iterdir()] == ["job.yaml"]


def test_a_torn_last_line_is_skipped(tmp_path):
    path = tmp_path / "events.jsonl"
    path.write_text(json.dumps({"event": "attempt_start"}) + "\n" + '{"event": "sig')
    assert records.read_jsonl(path) == [{"event": "attempt_start"}]


def test_index_finds_the_newest_record_of_a_job(tmp_path, monkeypatch):
    monkeypatch.setenv("HPCFLOW_HOME", str(tmp_path / "home"))
    a = records.JobRecord("5", "old", str(tmp_path / "r1"), 1.0)
    b = records.JobRecord("6", "new", str(tmp_path / "r2"), 2.0)
    records.record_submission(a, "#!/bin/bash\n", "name: old\n")
    records.record_submission(b, "#!/bin/bash\n", "name: new\n")
    assert [r.job_id for r in records.known_jobs()] == ["5", "6"]
    assert records.find_job("6") == b
    assert records.find_job("99") is None
    assert records.find_job("5").log_path == tmp_path / "r1" / "old-5.out"
    assert records.read_jsonl(tmp_path / "r2" / "submissions.jsonl")[0]["job_id"] == "6"


def test_job_events_keep_only_that_job(tmp_path):
    ledger = tmp_path / ".hpcflow" / "events.jsonl"
    records.append_jsonl(ledger, {"event": "attempt_start", "job_id": 1})
    records.append_jsonl(ledger, {"event": "attempt_start", "job_id": 2})
    assert len(records.job_events(tmp_path, "2")) == 1
