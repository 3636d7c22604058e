"""The supervisor's rules, table by table (hpcflow.supervisor.rules): pure, milliseconds each."""

from __future__ import annotations

import pytest

from hpcflow import protocol as P
from hpcflow.supervisor.endings import attempt_start, ending
from hpcflow.supervisor.rules import (
    History,
    Limits,
    RankExit,
    StepFacts,
    StepOutcome,
    after_failed_step,
    blame_node,
    failures,
    rank_summary,
    requeues_used,
)

OK = RankExit(0, 1000)
PREEMPTED = RankExit(75, 1000)
LIMITS = Limits(ntasks=2, step_nodes=1, max_requeues=3)
RES = Limits(ntasks=2, step_nodes=1, max_requeues=3, resilience=True, max_in_job_restarts=2,
             max_failures=3, exclude_after=2)


def facts(**changes) -> StepFacts:  # noqa: ANN003
    base = {"rc": 0, "exits": (OK, OK), "joined": ("n1", "n1")}
    base.update(changes)
    return StepFacts(**base)


# ---- the ending ladder -----------------------------------------------------------------------

@pytest.mark.parametrize(("step", "history", "limits", "requeue", "reason", "rc"), [
    pytest.param(facts(), History(), LIMITS, False, P.REASON_COMPLETED, 0, id="success"),
    pytest.param(facts(rc=134, done=True), History(), LIMITS, False,
                 P.REASON_COMPLETED_AFTER_DONE, 0, id="teardown-after-done"),
    pytest.param(facts(rc=0, stopped_unaware=True, warnings=1), History(), LIMITS, True,
                 P.REASON_REQUEUE_FAILED, 0, id="saves-on-term-and-exits-0-is-requeued"),
    pytest.param(facts(rc=143, stopped_unaware=True, warnings=1), History(), LIMITS, True,
                 P.REASON_REQUEUE_FAILED, 143, id="stopped-and-killed-is-requeued"),
    pytest.param(facts(rc=0, stopped_unaware=True, done=True), History(), LIMITS, False,
                 P.REASON_COMPLETED, 0, id="stopped-but-done-record-completes"),
    pytest.param(facts(rc=0, slurm_preempted=True, warnings=1), History(), LIMITS, True,
                 P.REASON_REQUEUE_FAILED, 0, id="slurm-preemption-unaware-exit-0"),
    pytest.param(facts(rc=143, slurm_preempted=True, warnings=1, exits=(None, None)), History(),
                 LIMITS, True, P.REASON_REQUEUE_FAILED, 143, id="slurm-preemption-killed-ranks"),
    pytest.param(facts(rc=75, committed_step=42, exits=(PREEMPTED, PREEMPTED), warnings=1),
                 History(), LIMITS, True, P.REASON_REQUEUE_FAILED, 75, id="committed"),
    pytest.param(facts(rc=0, committed_step=42, warnings=1), History(), LIMITS, True,
                 P.REASON_REQUEUE_FAILED, 75, id="committed-exit-0-still-requeued"),
    pytest.param(facts(rc=1, committed_step=42, warnings=1), History(restart=3), LIMITS, False,
                 P.REASON_REQUEUE_LIMIT, 75, id="committed-no-requeue-left"),
    pytest.param(facts(rc=75, committed_step=42, warnings=1), History(),
                 Limits(ntasks=2, step_nodes=1, max_requeues=3, requeue_allowed=False), False,
                 P.REASON_REQUEUE_DISABLED, 75, id="requeue-disabled"),
    pytest.param(facts(rc=75, committed_step=42, cancelled=True), History(), LIMITS, False,
                 P.REASON_CANCELLED, 75, id="cancelled-is-never-requeued"),
    pytest.param(facts(rc=0, exits=(None, None), joined=(None, None), cancelled=True), History(),
                 LIMITS, False, P.REASON_CANCELLED, 0, id="cancelled-exit-0-is-not-completed"),
    pytest.param(facts(rc=75, committed_step=42, time_limit=True), History(), LIMITS, False,
                 P.REASON_TIME_LIMIT, 75, id="time-limit-commit-is-never-requeued"),
    pytest.param(facts(rc=0, stopped_unaware=True, warnings=1, time_limit=True), History(),
                 LIMITS, False, P.REASON_TIME_LIMIT, 0, id="time-limit-after-a-stop"),
    pytest.param(facts(rc=134, done=True, time_limit=True), History(), LIMITS, False,
                 P.REASON_COMPLETED_AFTER_DONE, 0, id="done-before-the-limit-completes"),
    pytest.param(facts(rc=3, warnings=1, exits=(RankExit(3, 5, "boom"), OK)), History(), LIMITS,
                 False, P.REASON_PREEMPTED_NO_CHECKPOINT, 3, id="warned-without-commit"),
    pytest.param(facts(rc=137, exits=(None, OK)), History(), LIMITS, False, P.REASON_RANK_KILLED,
                 137, id="rank-killed"),
    pytest.param(facts(rc=137, exits=(None, None), joined=(None, None)), History(), LIMITS, False,
                 P.REASON_FAILED, 137, id="unaware-killed-is-failed"),
    pytest.param(facts(rc=1, exits=(RankExit(1, 9, "ValueError"), OK)), History(), LIMITS, False,
                 P.REASON_PROGRAM_ERROR, 1, id="program-error"),
    pytest.param(facts(rc=2, exits=(None, None), joined=(None, None)), History(), LIMITS, False,
                 P.REASON_FAILED, 2, id="plain-failure"),
    pytest.param(facts(rc=78, exits=(RankExit(78, 5, "network_fallback: NCCL over TCP sockets"),
                                     RankExit(78, 6, "network_fallback: NCCL over TCP sockets"))),
                 History(), LIMITS, False, P.REASON_NETWORK_FALLBACK, 78, id="network-fallback"),
])
def test_the_ending_ladder(step, history, limits, requeue, reason, rc):
    action = ending(step, history, limits, requeue_id="7")
    assert (action.requeue, action.reason, action.rc) == (requeue, reason, rc)


def test_a_requeue_names_its_cause_and_the_job():
    unaware = ending(facts(stopped_unaware=True), History(restart=1), LIMITS, requeue_id="7_2")
    assert unaware.requeue_fields == {"step": None, "checkpoint": False}
    assert "requeueing 7_2 (restart 2 of at most 3)" in unaware.log[0]
    committed = ending(facts(rc=75, committed_step=9, warnings=1), History(), LIMITS)
    assert committed.requeue_fields == {"step": 9}


def test_an_excluded_node_without_a_spare_requeues_without_counting_a_preemption():
    out = StepOutcome(restart=False, exclusion_requeue=True, excluded=("n1",))
    action = ending(facts(rc=137, exits=(None, OK), latest_checkpoint=5),
                    History(restart=3, requeues=3), RES, outcome=out)
    assert action.requeue and action.exclude == ("n1",)
    assert action.requeue_fields == {"step": 5, "cause": P.REASON_NODE_EXCLUDED,
                                     "excluded": "n1"}


def test_the_restart_rules_reason_replaces_the_generic_one():
    out = StepOutcome(restart=False, fail_reason=P.REASON_FAILURE_LIMIT)
    assert ending(facts(rc=137, exits=(None, OK)), History(), RES,
                  outcome=out).reason == P.REASON_FAILURE_LIMIT
    # ... but never a requeue's or a success's.
    assert ending(facts(), History(), RES, outcome=out).reason == P.REASON_COMPLETED


# ---- budgets and blame -----------------------------------------------------------------------

@pytest.mark.parametrize(("history", "expected"), [
    pytest.param(History(), 0, id="none"),
    pytest.param(History(step_restarts=2), 2, id="in-job-restarts"),
    pytest.param(History(restart=2, requeues=1), 1, id="one-requeue-by-slurm"),
    pytest.param(History(restart=1, requeues=2), 0, id="never-negative"),
    pytest.param(History(restart=1, requeues=1, exclusion_requeues=1), 1, id="exclusion-requeue"),
])
def test_failures(history, expected):
    assert failures(history) == expected


def test_requeues_used_count_only_warned_requeues_with_resilience():
    h = History(restart=3, requeues=2, exclusion_requeues=1)
    assert requeues_used(h, LIMITS) == 3 and requeues_used(h, RES) == 1


@pytest.mark.parametrize(("step", "node"), [
    pytest.param(facts(rc=137, exits=(None, OK)), "n1", id="killed-rank-on-n1"),
    pytest.param(facts(rc=137, exits=(None, None), joined=("n1", "n2")), None,
                 id="several-nodes"),
    pytest.param(facts(rc=137, exits=(None, OK), joined=("", "n1")), None, id="unknown-node"),
    pytest.param(facts(rc=137, exits=(None, OK), joined=(None, "n1")), None, id="not-joined"),
    pytest.param(facts(rc=0), None, id="success"),
    pytest.param(facts(rc=137, exits=(None, OK), hang=True), None, id="hang"),
    pytest.param(facts(rc=1, exits=(None, OK), error_sigs=("E@3",)), None, id="program-error"),
    pytest.param(facts(rc=137, exits=(None, OK), warnings=1), None, id="warned"),
    pytest.param(facts(rc=137, exits=(None, OK), done=True), None, id="done"),
])
def test_blame_node(step, node):
    assert blame_node(step) == node


# ---- in-job restarts -------------------------------------------------------------------------

def restart(step, history=History(), limits=RES, **kw):  # noqa: ANN001, ANN003, ANN201, B008
    args = {"try_": 0, "prev_error": "", "hosts": ["n1", "n2"], "excluded": (),
            "errors_path": ".hpcflow/errors"}
    args.update(kw)
    return after_failed_step(step, history, limits, **args)


KILLED = facts(rc=137, exits=(None, OK), latest_checkpoint=5)


@pytest.mark.parametrize(("step", "history", "kw", "go", "reason"), [
    pytest.param(KILLED, History(blamed={"n1": 1}), {}, True, None, id="rank-failure"),
    pytest.param(facts(rc=0, latest_checkpoint=5), History(), {}, False, None, id="success"),
    pytest.param(facts(rc=75, committed_step=5, latest_checkpoint=5), History(), {}, False, None,
                 id="warned"),
    pytest.param(KILLED, History(blamed={"n1": 1}), {"try_": 2}, False, None, id="bound-used"),
    pytest.param(facts(rc=137, exits=(None, None), joined=(None, None)),
                 History(blamed={"n1": 1}), {}, False, None, id="no-checkpoint-never-joined"),
    pytest.param(facts(rc=137, exits=(None, OK)), History(blamed={"n1": 1}), {}, True, None,
                 id="no-checkpoint-yet-rank-killed"),
    pytest.param(facts(rc=143, exits=(OK, OK), hang=True), History(), {}, True, None,
                 id="no-checkpoint-yet-hang"),
    pytest.param(facts(rc=64, exits=(RankExit(64, 3, "SystemExit: 64"),) * 2), History(), {},
                 False, None, id="no-checkpoint-every-rank-exited-itself"),
    pytest.param(KILLED, History(step_restarts=3, blamed={"n1": 1}), {}, False,
                 P.REASON_FAILURE_LIMIT, id="failure-budget"),
    pytest.param(facts(rc=1, exits=(RankExit(1, 3), OK), error_sigs=("E@3",), latest_checkpoint=5),
                 History(), {"prev_error": "E@3"}, False, P.REASON_PROGRAM_ERROR,
                 id="same-exception-twice"),
    pytest.param(facts(rc=1, exits=(RankExit(1, 3), OK), error_sigs=("E@3",), latest_checkpoint=5),
                 History(), {"prev_error": "E@2"}, True, None, id="another-exception"),
    pytest.param(facts(rc=143, exits=(None, None), latest_checkpoint=5, cancelled=True),
                 History(), {}, False, None, id="cancelled-is-not-restarted"),
    pytest.param(facts(rc=143, exits=(None, None), latest_checkpoint=5, time_limit=True),
                 History(), {}, False, None, id="time-limit-is-not-restarted"),
])
def test_after_a_failed_step(step, history, kw, go, reason):
    out = restart(step, history, **kw)
    assert (out.restart, out.fail_reason) == (go, reason)
    if go:
        assert out.events[-1][0] == P.EVENT_STEP_RESTART
        assert out.events[-1][1]["try"] == kw.get("try_", 0) + 1


def test_a_joined_program_without_a_checkpoint_starts_again_from_the_start():
    out = restart(facts(rc=137, exits=(None, OK)), History(blamed={"n1": 1}))
    assert out.events[-1] == (P.EVENT_STEP_RESTART,
                              {"try": 1, "rc": 137, "cause": "rank_failure", "step": None})
    assert "from the start (no committed checkpoint yet)" in out.log[-1]
    unaware = restart(facts(rc=137, exits=(None, None), joined=(None, None)))
    assert not unaware.restart and "no committed checkpoint" in unaware.log[-1]


def test_a_network_fall_back_is_never_restarted_in_the_allocation():
    step = facts(rc=78, exits=(RankExit(78, 5, "network_fallback: TCP"), OK), latest_checkpoint=5)
    out = restart(step)
    assert not out.restart and out.cause == "network_fallback" and out.events == ()


def test_a_hang_is_the_cause_when_no_rank_raised():
    out = restart(facts(rc=143, exits=(None, None), hang=True, latest_checkpoint=5))
    assert out.restart and out.cause == "hang"


def test_a_node_with_its_share_of_failures_is_excluded_for_a_spare():
    out = restart(KILLED, History(blamed={"n1": 2}))
    assert out.restart and out.excluded == ("n1",) and out.srun_exclude == ("n1",)
    name, ev = out.events[0]
    assert name == P.EVENT_NODE_EXCLUDED and ev == {"node": "n1", "failures": 2,
                                                   "excluded": "n1", "spare": True}


def test_without_a_spare_the_excluded_node_means_a_requeue():
    out = restart(KILLED, History(blamed={"n1": 2}), hosts=["n1"])
    assert not out.restart and out.exclusion_requeue and out.excluded == ("n1",)
    assert out.events[0][1]["spare"] is False


def test_without_a_spare_and_no_failure_left_the_job_ends():
    out = restart(KILLED, History(blamed={"n1": 2}, step_restarts=3), hosts=["n1"])
    assert not out.restart and not out.exclusion_requeue
    assert out.fail_reason == P.REASON_FAILURE_LIMIT and out.events == ()


def test_the_rank_summary_names_the_earliest_failure():
    step = facts(rc=1, exits=(RankExit(1, 900, "late"), RankExit(2, 100, "early"), None))
    fields, words = rank_summary(step)
    assert fields["first_failure"] == {"rank": 1, "rc": 2, "reason": "early"}
    assert (fields["ranks_exited"], fields["ranks_missing"], fields["missing"]) == (2, 1, [2])
    assert words == ("rank(s) 2 left no exit record (killed by a signal); of the ranks that "
                     "recorded one, the first failure: rank 1 exited with status 2: early")
    _, words = rank_summary(facts(rc=1, exits=(RankExit(1, 900, "late"), RankExit(2, 100, "x"))))
    assert words == "first failure: rank 1 exited with status 2: x"
    assert rank_summary(facts(rc=0, exits=(None, None)))[1] == ""  # a program that never joined


# ---- attempt start -------------------------------------------------------------------------

def test_an_attempt_past_the_failure_bound_does_not_start():
    verdict = attempt_start(History(restart=4), RES, ["n1", "n2"])
    assert not verdict.start and verdict.reason == P.REASON_FAILURE_LIMIT
    assert attempt_start(History(restart=4), LIMITS, ["n1"]).start  # no resilience: no bound


@pytest.mark.parametrize(("hosts", "avoid", "ignored"), [
    pytest.param(["n1", "n2"], ("n1",), (), id="others-left"),
    pytest.param(["n2", "n3"], (), (), id="not-in-this-allocation"),
    pytest.param(["n1"], (), ("n1",), id="exclusion-lost-says-so"),
])
def test_steps_avoid_nodes_excluded_earlier(hosts, avoid, ignored):
    verdict = attempt_start(History(excluded=("n1",)), RES, hosts)
    assert verdict.start and verdict.srun_exclude == avoid and verdict.ignored == ignored




# ---- under HyperPod's auto-resume (srun --auto-resume=1) ------------------------------------

AUTO = Limits(ntasks=2, step_nodes=1, max_requeues=3, resilience=True, max_in_job_restarts=2,
              max_failures=3, exclude_after=2, auto_resume=True)
ERROR = facts(rc=1, exits=(RankExit(1, 3), OK), error_sigs=("E@3",), latest_checkpoint=5)
HUNG = facts(rc=143, exits=(None, None), hang=True, latest_checkpoint=5)


@pytest.mark.parametrize(("step", "history", "kw", "go", "cause"), [
    # A node fault's mark (ranks lost without an exit record) is HyperPod's: no restart here,
    # whatever the budgets leave, and no exclusion even at the node's exclusion count.
    pytest.param(KILLED, History(blamed={"n1": 1}), {}, False, "rank_failure",
                 id="rank-failure-is-hyperpods"),
    pytest.param(KILLED, History(blamed={"n1": 2}), {}, False, "rank_failure",
                 id="blamed-node-is-not-excluded"),
    pytest.param(KILLED, History(blamed={"n1": 2}), {"hosts": ["n1"]}, False, "rank_failure",
                 id="no-exclusion-requeue-without-a-spare"),
    pytest.param(facts(rc=137, exits=(None, OK)), History(), {}, False, "rank_failure",
                 id="no-checkpoint-rank-killed"),
    pytest.param(facts(rc=1, exits=(RankExit(1, 3), RankExit(1, 3)), latest_checkpoint=5),
                 History(), {}, False, "rank_failure", id="failed-without-exception"),
    # What HyperPod leaves alone keeps hpcflow's in-job restart.
    pytest.param(ERROR, History(), {}, True, "program_error", id="program-error-restarts"),
    pytest.param(ERROR, History(), {"prev_error": "E@3"}, False, "program_error",
                 id="same-exception-twice-stops"),
    pytest.param(HUNG, History(), {}, True, "hang", id="hang-restarts"),
    pytest.param(HUNG, History(), {"try_": 2}, False, "hang", id="hang-bound-used"),
    pytest.param(HUNG, History(step_restarts=3), {}, False, "hang", id="hang-failure-budget"),
    # The warning path is untouched: nothing restarts, the ending requeues.
    pytest.param(facts(rc=75, committed_step=5, latest_checkpoint=5, warnings=1), History(), {},
                 False, "rank_failure", id="warned"),
])
def test_under_auto_resume_node_faults_are_hyperpods(step, history, kw, go, cause):
    out = restart(step, history, limits=AUTO, excluded=kw.pop("excluded", ()), **kw)
    assert (out.restart, out.cause) == (go, cause)
    assert out.srun_exclude == () and out.excluded == () and not out.exclusion_requeue
    assert all(name != P.EVENT_NODE_EXCLUDED for name, _ in out.events)
    if go:
        assert out.events[-1][0] == P.EVENT_STEP_RESTART
    elif cause == "rank_failure" and not step.warned:
        assert "HyperPod" in out.log[-1] and out.events == ()


def test_without_auto_resume_the_same_steps_are_hpcflows():
    """The rows above, with the same limits but auto-resume off: restart and exclusion."""
    assert restart(KILLED, History(blamed={"n1": 1}), limits=RES).restart
    out = restart(KILLED, History(blamed={"n1": 2}), limits=RES)
    assert out.restart and out.srun_exclude == ("n1",)
    assert restart(KILLED, History(blamed={"n1": 2}), limits=RES, hosts=["n1"]).exclusion_requeue


def test_under_auto_resume_a_committed_warning_still_requeues():
    step = facts(rc=75, committed_step=42, exits=(PREEMPTED, PREEMPTED), warnings=1)
    action = ending(step, History(), AUTO, outcome=restart(step, limits=AUTO))
    assert action.requeue and action.exclude == ()


def test_under_auto_resume_a_lost_rank_ends_the_attempt_as_rank_killed():
    outcome = restart(KILLED, History(blamed={"n1": 2}), limits=AUTO, hosts=["n1"])
    action = ending(KILLED, History(blamed={"n1": 2}), AUTO, outcome=outcome)
    assert (action.requeue, action.reason, action.exclude) == (False, P.REASON_RANK_KILLED, ())


@pytest.mark.parametrize("hosts", [["n1", "n2"], ["n1"], ["n2", "n3"]])
def test_under_auto_resume_steps_avoid_no_node_excluded_earlier(hosts):
    verdict = attempt_start(History(excluded=("n1",)), AUTO, hosts)
    assert verdict.start and verdict.srun_exclude == () and verdict.ignored == ()
    assert not attempt_start(History(restart=4), AUTO, hosts).start  # the failure bound stays
