"""The goodput ledger: pending, startup, training, checkpointing and lost time per attempt."""

import json
import xml.etree.ElementTree as ET

import pytest

from hpcflow.jobs.report import build_report, split_log
from hpcflow.jobs.timeline import render_svg

T0 = 1_800_000_000.0


def ev(event, t, restart, **extra):
    return {"event": event, "time": T0 + t, "job_id": "9", "restart": restart, **extra}


def banner(attempt, job="9"):
    return f"hpcflow: 2026-11-30T00:00:00+0000 job {job} attempt {attempt} on n[1-2]: starting 8 rank(s)"


def steps(first, last, dt=1.0):
    return [f'hpcflow-step {json.dumps({"step": s, "loss": 0.1, "step_time_s": dt})}'
            for s in range(first, last + 1)]


# Attempt 0 trains 1-15 with an interval checkpoint at 10, then its node dies (no commit
# after 10). Attempt 1 resumes at 10 and trains 11-20: steps 11-15 were lost.
LOG = "\n".join([
    banner(0), 'hpcflow-start {"world_size": 8}', *steps(1, 10),
    'hpcflow-checkpoint {"reason": "interval", "save_s": 2.0, "step": 10}', *steps(11, 15),
    "srun: error: node failure", banner(0, job="77"), *steps(1, 3),  # another job's lines
    banner(1), 'hpcflow-resume {"step": 10}', *steps(11, 20),
    'hpcflow-checkpoint {"reason": "final", "save_s": 1.0, "step": 20}',
    'hpcflow-done {"step": 20, "params_sha256": "x"}',
])
EVENTS = [ev("attempt_start", 5, 0), ev("step_end", 40, 0, rc=137),
          ev("attempt_start", 100, 1), ev("step_end", 130, 1, rc=0),
          ev("job_end", 130, 1, rc=0, reason="completed")]


def test_split_log_keeps_only_this_jobs_attempts():
    parts = split_log(LOG, "9")
    assert sorted(parts) == [0, 1]
    assert sum(1 for tag, _ in parts[0] if tag == "hpcflow-step") == 15


def test_steps_redone_after_a_restart_are_lost():
    rep = build_report("9", submitted_at=T0, events=EVENTS, log_text=LOG, now_s=T0 + 999)
    a0, a1 = rep.attempts
    assert (a0.first_step, a0.last_step, a0.lost_s, a0.training_s) == (1, 15, 5.0, 10.0)
    assert (a1.resumed_from, a1.first_step, a1.last_step, a1.lost_s) == (10, 11, 20, 0.0)
    assert rep.totals["lost"] == 5.0 and rep.totals["training"] == 20.0
    assert rep.totals["checkpointing"] == 3.0


def test_pending_runs_from_submission_and_from_the_previous_end():
    rep = build_report("9", submitted_at=T0, events=EVENTS, log_text=LOG, now_s=T0 + 999)
    assert [a.pending_s for a in rep.attempts] == [5.0, 60.0]


def test_wall_time_splits_into_the_categories_and_goodput_is_training_over_wall():
    rep = build_report("9", submitted_at=T0, events=EVENTS, log_text=LOG, now_s=T0 + 999)
    assert rep.wall_s == 130.0
    assert sum(rep.totals.values()) == pytest.approx(rep.wall_s)
    assert rep.goodput == pytest.approx(20.0 / 130.0)
    assert [a.outcome for a in rep.attempts] == ["interrupted", "completed"]


def test_goodput_holding_nodes_leaves_the_queue_out():
    rep = build_report("9", submitted_at=T0, events=EVENTS, log_text=LOG, now_s=T0 + 999)
    assert rep.totals["pending"] == 65.0
    assert rep.goodput_holding_nodes() == pytest.approx(20.0 / (130.0 - 65.0))
    nothing = build_report("9", submitted_at=T0, events=[], log_text="", now_s=T0 + 10)
    assert nothing.goodput_holding_nodes() is None


def test_a_running_job_counts_up_to_now():
    rep = build_report("9", submitted_at=T0, events=EVENTS[:3], log_text=LOG, now_s=T0 + 150)
    assert rep.wall_s == 150.0 and rep.attempts[-1].outcome == "running"


def test_nothing_ran_yet():
    rep = build_report("9", submitted_at=T0, events=[], log_text="", now_s=T0 + 10)
    assert rep.attempts == [] and rep.goodput is None


def test_timeline_is_svg_with_a_row_per_attempt_and_signal_ticks():
    rep = build_report("9", submitted_at=T0, events=EVENTS, log_text=LOG, now_s=T0 + 999)
    svg = render_svg(rep, [ev("signal", 30, 0)])
    root = ET.fromstring(svg)
    texts = [t.text for t in root.iter("{http://www.w3.org/2000/svg}text")]
    assert "attempt 1" in texts and "attempt 2" in texts
    assert any(t and t.startswith("lost 5 s") for t in texts)
    assert len(list(root.iter("{http://www.w3.org/2000/svg}line"))) == 1
