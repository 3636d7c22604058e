"""How status and report read node exclusions from the ledger (docs/protocol.md, "Spare nodes
and node exclusion"): a requeue without a node is its own ending kind, not a warned preemption,
and each excluded node is listed."""

from __future__ import annotations

from hpcflow import ending_kinds as K
from hpcflow import protocol as P
from hpcflow.jobs.endings import excluded_nodes, ledger_ending
from hpcflow.jobs.report import build_report


def ev(event: str, t: int, restart: int = 0, **fields) -> dict:  # noqa: ANN003
    return {"event": event, "time": t, "job_id": "7", "restart": restart, **fields}


LEDGER = [
    ev("attempt_start", 100, nodelist="n1"),
    ev("step_end", 110, rc=137, node="n1"),
    ev("step_restart", 110, **{"try": 1, "rc": 137, "cause": "rank_failure", "step": 5}),
    ev("step_end", 120, rc=137, node="n1"),
    ev("node_excluded", 120, node="n1", failures=2, excluded="n1", spare=False),
    ev("requeue", 120, step=10, cause="node_excluded", excluded="n1"),
    ev("attempt_start", 130, restart=1, nodelist="n2"),
    ev("step_end", 150, restart=1, rc=0, node=None),
    ev("job_end", 150, restart=1, rc=0, reason="completed"),
]
LOG = "\n".join([
    "hpcflow: 2026-01-01T00:00:00+0000 job 7 attempt 0 on n1: starting 1 rank(s)",
    *(f'hpcflow-step {{"step": {s}, "step_time_s": 1.0}}' for s in range(1, 9)),
    'hpcflow-start {"world_size": 1}',
    *(f'hpcflow-step {{"step": {s}, "step_time_s": 1.0}}' for s in range(6, 13)),
    "hpcflow: 2026-01-01T00:00:30+0000 job 7 attempt 1 on n2: starting 1 rank(s)",
    'hpcflow-resume {"step": 10}',
    *(f'hpcflow-step {{"step": {s}, "step_time_s": 1.0}}' for s in range(11, 21)),
])


def test_a_requeue_without_a_node_is_the_node_excluded_kind() -> None:
    kind, detail = ledger_ending(LEDGER[:6])
    assert kind == K.ENDING_NODE_EXCLUDED
    assert "n1" in detail and "no spare" in detail
    assert K.REASON_KIND[P.REASON_NODE_EXCLUDED] == K.ENDING_NODE_EXCLUDED
    assert K.ENDING_NODE_EXCLUDED in K.ENDING_KINDS


def test_a_warned_requeue_stays_a_preemption() -> None:
    assert ledger_ending([ev("attempt_start", 1), ev("requeue", 2, step=5)])[0] == (
        K.ENDING_PREEMPTED)


def test_the_report_lists_the_exclusion_as_a_failure_with_its_lost_steps() -> None:
    rep = build_report("7", submitted_at=90, events=LEDGER, log_text=LOG, now_s=200,
                       alive=False)
    first, second = rep.attempts
    assert first.ending == K.ENDING_NODE_EXCLUDED and first.outcome == "requeue"
    assert second.ending == K.ENDING_COMPLETED
    kinds = [(f.kind, f.steps) for f in rep.failures]
    assert kinds == [(K.ENDING_RANK_RESTARTED, "6-8"), (K.ENDING_NODE_EXCLUDED, "11-12")]


def test_excluded_nodes_are_listed_per_attempt() -> None:
    assert excluded_nodes(LEDGER) == [
        {"attempt": 1, "node": "n1", "failures": 2, "spare": False, "time": 120}]
    assert excluded_nodes(LEDGER[:4]) == []


def test_a_restart_without_a_checkpoint_reads_from_the_start() -> None:
    ledger = [
        ev("attempt_start", 100, nodelist="n1"),
        ev("step_end", 110, rc=137, node="n1"),
        ev("step_restart", 110, **{"try": 1, "rc": 137, "cause": "rank_failure", "step": None}),
        ev("step_end", 150, rc=0, node=None),
        ev("job_end", 150, rc=0, reason="completed"),
    ]
    rep = build_report("7", submitted_at=90, events=ledger, log_text=LOG, now_s=200,
                       alive=False)
    (failure,) = rep.failures
    assert "from the start (no committed checkpoint)" in failure.detail
    assert "step=null" not in failure.detail and 'cause="rank_failure"' in failure.detail
