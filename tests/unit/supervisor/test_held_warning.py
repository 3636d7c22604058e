"""A warning held for a program whose handler is not in place yet goes to it once the step's
every process catches it (hpcflow.supervisor.turns, with the effects faked)."""

from __future__ import annotations

from pathlib import Path

import pytest

from hpcflow import ledger
from hpcflow import protocol as P
from hpcflow.supervisor import effects, facts, turns
from hpcflow.supervisor.sigcatch import NodeReport

CFG = {"ntasks": 2, "step_nodes": 1, "max_requeues": 3, "max_preemptions": 20,
       "requeue_allowed": True, "resilience": False, "signal": "USR1", "launcher": "srun",
       "program_protocol": "auto", "requeue_margin_s": 30, "hpcflow_python": "python3",
       "term_grace_s": 10}


@pytest.fixture
def turn(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    answers: list[list[NodeReport]] = []
    sent: list[tuple[int, str]] = []
    monkeypatch.setattr(effects, "catch_reports", lambda argv: answers.pop(0))
    monkeypatch.setattr(effects, "step_alive", lambda pid: True)
    monkeypatch.setattr(effects, "forward", lambda pid, name: sent.append((pid, name)) or True)
    monkeypatch.setattr(facts, "slurm_job", lambda job_id: facts.SlurmJob())
    monkeypatch.setattr(turns, "CATCH_RECHECK_S", 0.0)
    run_dir = tmp_path / "run"
    P.state_dir(run_dir).mkdir(parents=True)
    job = turns.Job(CFG, job_id="7", requeue_id="7", restart=0, nodelist="n1", run_dir=run_dir,
                    checkpoint_dir=run_dir / "ckpt")
    t = turns.Turns(job, deadline_s=10_000, now=lambda: 1_000)
    return t, answers, sent


STARTING = [NodeReport("n1", ranks=(0, 1), processes=2, handling=0,
                       not_catching=((11, "python3"), (12, "python3")), not_catching_count=2)]
CATCHING = [NodeReport("n1", ranks=(0, 1), processes=2, handling=2)]


def test_the_warning_waits_for_the_handlers_then_goes_once(turn):
    t, answers, sent = turn
    answers += [STARTING, STARTING, CATCHING]
    t.warning("USR1", step_pid=42)
    assert sent == [] and t.state.held
    t.recheck_held("USR1", step_pid=42)
    assert sent == [] and t.state.held
    t.recheck_held("USR1", step_pid=42)
    assert sent == [(42, "USR1")] and t.state.forwarded and not t.state.held
    t.recheck_held("USR1", step_pid=42)  # nothing more is asked or sent
    assert sent == [(42, "USR1")] and answers == []
    events = ledger.read_events(t.job.paths.ledger)
    [first] = [e["catch"] for e in events if e["event"] == P.EVENT_SIGNAL]
    assert first["forwarded"] is False and first["not_catching"][0]["comm"] == "python3"
    later = [e for e in events if e["event"] == P.EVENT_CATCH_CHECK]
    assert [c["forwarded"] for c in later] == [True]


def test_a_stopped_program_is_not_asked_again(turn, monkeypatch):
    t, answers, sent = turn
    answers += [STARTING]
    t.warning("USR1", step_pid=42)
    assert t.state.held
    monkeypatch.setattr(effects, "stop_program", lambda *a, **k: "term")
    t.deadline(step_pid=42)  # the stop timer: no rank joined, the program is stopped
    t.recheck_held("USR1", step_pid=42)
    assert sent == [] and answers == [] and not t.state.held


def test_the_programs_own_requeue_is_recorded_at_slurms_term(turn, monkeypatch):
    t, answers, sent = turn
    answers += [CATCHING]
    t.warning("USR1", step_pid=42)
    assert sent == [(42, "USR1")] and t.state.forwarded
    monkeypatch.setattr(facts, "slurm_job",
                        lambda job_id: facts.SlurmJob(state="PENDING", restarts=1))
    t.terminated = True
    t.on_term()
    requeues = [e for e in ledger.read_events(t.job.paths.ledger) if e["event"] == "requeue"]
    assert len(requeues) == 1 and requeues[0]["by"] == P.REQUEUED_BY_PROGRAM
    t.after_step(143)
    assert t.end(143) == 0  # decided at the TERM: nothing more is recorded or requeued
    assert sum(e["event"] in ("requeue", "job_end")
               for e in ledger.read_events(t.job.paths.ledger)) == 1


def test_a_term_that_is_not_a_requeue_records_nothing_early(turn, monkeypatch):
    t, answers, sent = turn
    answers += [CATCHING]
    t.warning("USR1", step_pid=42)
    monkeypatch.setattr(facts, "slurm_job",
                        lambda job_id: facts.SlurmJob(state="CANCELLED", restarts=0))
    t.terminated = True
    t.on_term()
    assert not t.state.requeue_recorded
    assert not [e for e in ledger.read_events(t.job.paths.ledger) if e["event"] == "requeue"]


def test_every_warning_of_an_attempt_goes_to_a_program_that_catches_it(turn):
    """A plain sbatch --signal delivers each warning: a program that took the first and kept
    running gets Slurm's own time-limit warning too."""
    t, answers, sent = turn
    answers += [CATCHING, CATCHING]
    t.warning("USR1", step_pid=42)
    t.warning("USR1", step_pid=42)
    assert sent == [(42, "USR1"), (42, "USR1")]
    signals = [e for e in ledger.read_events(t.job.paths.ledger) if e["event"] == P.EVENT_SIGNAL]
    assert [e["forwarded"] for e in signals] == [True, True]
