"""Programs that catch the warning themselves: the kernel's masks, the probe on a fake /proc,
the forward rule, the warning's cause, the program's own requeue, the budgets and the exit
status of every ending (hpcflow.supervisor.sigcatch, sigprobe, warning, endings, budgets)."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from hpcflow import protocol as P
from hpcflow.supervisor import warning
from hpcflow.supervisor.budgets import exit_status
from hpcflow.supervisor.endings import ending
from hpcflow.supervisor.rules import History, Limits, RankExit, StepFacts, requeues_used
from hpcflow.supervisor.sigcatch import (
    NodeReport,
    catches,
    forward_verdict,
    masks,
    parse_listpids,
)
from hpcflow.supervisor.sigprobe import probe

USR1 = int(signal.SIGUSR1)  # 10: bit 9 of the mask (proc(5))
CATCHES_USR1 = "0000000000000200"
NOTHING = "0000000000000000"


def status(cgt: str = NOTHING, ign: str = NOTHING, name: str = "python3") -> str:
    return f"Name:\t{name}\nState:\tS (sleeping)\nSigIgn:\t{ign}\nSigCgt:\t{cgt}\n"


# ---- the masks -----------------------------------------------------------------------------

@pytest.mark.parametrize(("cgt", "ign", "signum", "expected"), [
    pytest.param(CATCHES_USR1, NOTHING, USR1, True, id="usr1-caught"),
    pytest.param(NOTHING, CATCHES_USR1, USR1, True, id="usr1-ignored-survives"),
    pytest.param(NOTHING, NOTHING, USR1, False, id="default-action-dies"),
    pytest.param("0000000000000800", NOTHING, USR1, False, id="usr2-only"),
    pytest.param("0000000180004a02", NOTHING, 12, True, id="python-with-usr2-handler"),
    pytest.param("8000000000000000", NOTHING, 64, True, id="signal-64-is-the-top-bit"),
    pytest.param("0000000000000001", NOTHING, 1, True, id="signal-1-is-the-low-bit"),
])
def test_a_signal_is_caught_when_its_bit_is_set(cgt, ign, signum, expected):
    assert catches(status(cgt, ign), signum) is expected


@pytest.mark.parametrize("text", ["", "SigCgt:\t0200\n", "SigCgt:\tzz\nSigIgn:\t0\n"],
                         ids=["empty", "no-sigign", "not-hex"])
def test_unreadable_masks_are_none(text):
    assert masks(text) is None and catches(text, USR1) is None


def test_a_signal_number_outside_1_to_64_is_refused():
    with pytest.raises(ValueError, match="outside 1-64"):
        catches(status(), 65)


def test_listpids_lines_parse_and_headers_are_skipped():
    text = ("PID      JOBID    STEPID   LOCALID GLOBALID\n20695    1        0        0       3\n"
            "20697    1        0        -       -\n20001    1        batch    0       0\ngarbage\n")
    listed = parse_listpids(text)
    assert [(p.pid, p.step, p.local_id, p.global_id) for p in listed] == [
        (20695, "0", 0, 3), (20697, "0", None, None), (20001, "batch", 0, 0)]


# ---- the probe on a fake /proc -------------------------------------------------------------------

def fake_proc(tmp_path: Path, procs: dict[int, tuple[str, str | None]]) -> Path:
    """pid -> (status text, environ marker try or None)."""
    for pid, (text, try_) in procs.items():
        d = tmp_path / str(pid)
        d.mkdir()
        (d / "status").write_text(text)
        env = ["SLURM_JOB_ID=7", "PATH=/bin"] + ([f"{P.ENV_STEP_TRY}={try_}"] if try_ else [])
        (d / "environ").write_bytes("\0".join(env).encode() + b"\0")
    return tmp_path


LISTING = ("PID JOBID STEPID LOCALID GLOBALID\n"
           "100 7 batch 0 0\n"    # the batch script: never the program's
           "200 7 0 0 2\n"        # rank 2, a python that catches USR1
           "201 7 0 1 3\n"        # rank 3
           "202 7 0 - -\n"        # a child of a rank (a data loader worker)
           "300 7 2 0 0\n")       # the spot watcher's step: no try marker


def test_the_probe_reads_the_program_steps_processes_only(tmp_path):
    proc = fake_proc(tmp_path, {100: (status(), None), 200: (status(CATCHES_USR1), "0"),
                                201: (status(CATCHES_USR1), "0"),
                                202: (status(ign=CATCHES_USR1), "0"), 300: (status(), None)})
    report = probe("7", "0", USR1, "n2", LISTING, proc=proc)
    assert report == NodeReport("n2", ranks=(2, 3), processes=3, handling=2)


def test_the_probe_names_a_process_that_would_die(tmp_path):
    proc = fake_proc(tmp_path, {200: (status(CATCHES_USR1), "0"),
                                201: (status(name="bash"), "0"),
                                202: (status(CATCHES_USR1), "0")})
    report = probe("7", "0", USR1, "n1", LISTING, proc=proc)
    assert report.not_catching == ((201, "bash"),) and report.not_catching_count == 1


def test_the_probe_finds_nothing_for_another_try(tmp_path):
    proc = fake_proc(tmp_path, {200: (status(CATCHES_USR1), "0")})
    assert probe("7", "1", USR1, "n1", LISTING, proc=proc) == NodeReport("n1")


def test_a_report_round_trips_and_hostile_lines_do_not_decode():
    report = NodeReport("n1", (0, 1), 3, 2, ((9, "bash"),), 1)
    assert NodeReport.decode(report.encode()) == report
    for line in ["", "srun: error", "[]", '{"node": 3}', '{"node": "n", "processes": "x"}',
                 '{"node": "n", "processes": -1}', '{"node": "n", "processes": true}']:
        assert NodeReport.decode(line) is None, line


# ---- the forward rule ----------------------------------------------------------------------------

def node(name: str, ranks: tuple[int, ...], dying: int = 0, handling: int = 1) -> NodeReport:
    return NodeReport(name, ranks, processes=len(ranks) + dying, handling=handling,
                      not_catching=tuple((100 + i, "bash") for i in range(dying)),
                      not_catching_count=dying)


@pytest.mark.parametrize(("reports", "tasks", "forward", "words"), [
    pytest.param([node("n1", (0, 1)), node("n2", (2, 3))], 4, True, "catches USR1 itself",
                 id="every-rank-catches"),
    pytest.param([node("n1", (0, 1)), node("n2", (2, 3), dying=1)], 4, False, "would die",
                 id="some-catch"),
    pytest.param([node("n1", (0, 1), dying=2, handling=0)], 2, False, "would die",
                 id="none-catch"),
    pytest.param([node("n1", (0,), dying=1)], 1, False, "would die",
                 id="torchrun-launcher-dies-workers-catch"),
    pytest.param([node("n1", (0, 1)), node("n2", (2,))], 4, False, "3 of 4 task(s)",
                 id="a-rank-not-yet-started"),
    pytest.param([node("n1", (0, 1), handling=0)], 2, False, "no process of the step has a handler",
                 id="ignored-only"),
    pytest.param([NodeReport("n1", error="scontrol listpids: refused")], 1, False,
                 "could not be read", id="unreadable-node"),
])
def test_the_forward_rule(reports, tasks, forward, words):
    verdict = forward_verdict(reports, tasks=tasks, signal="USR1")
    assert verdict.forward is forward and words in verdict.why


CATCHING = forward_verdict([node("n1", (0, 1))], tasks=2, signal="USR1")
DYING = forward_verdict([node("n1", (0, 1), dying=1)], tasks=2, signal="USR1")


@pytest.mark.parametrize(("protocol", "joined", "catch", "forward", "first"), [
    pytest.param("auto", 2, None, True, "every rank joined", id="all-joined"),
    pytest.param("auto", 0, CATCHING, True, "forwarding it to the step", id="program-catches"),
    pytest.param("handles_signal", 0, CATCHING, True, "forwarding", id="said-and-catches"),
    pytest.param("auto", 0, DYING, False, "no rank has joined", id="program-would-die"),
    pytest.param("auto", 1, DYING, False, "1 of 2 rank(s) joined", id="some-joined"),
    pytest.param("requeue", 0, CATCHING, False, "program.protocol is requeue", id="requeue-only"),
])
def test_the_warning_goes_to_a_program_that_catches_it(protocol, joined, catch, forward, first):
    plan = warning.on_warning(protocol=protocol, launcher="srun", signal="USR1", joined=joined,
                              ntasks=2, step_running=True, catch=catch)
    assert plan.forward is forward and first in plan.log[0]
    assert "asking the ranks to checkpoint" not in " ".join(plan.log) or joined == 2


@pytest.mark.parametrize(("protocol", "joined", "running", "wanted"), [
    ("auto", 0, True, True), ("handles_signal", 1, True, True), ("auto", 2, True, False),
    ("requeue", 0, True, False), ("auto", 0, False, False)])
def test_which_steps_are_read(protocol, joined, running, wanted):
    assert warning.wants_catch_check(protocol=protocol, joined=joined, ntasks=2,
                                     step_running=running) is wanted


@pytest.mark.parametrize(("notice", "moved", "cause"), [
    (False, False, P.CAUSE_TIME_LIMIT), (True, False, P.CAUSE_PREEMPTION),
    (False, True, P.CAUSE_PREEMPTION), (True, True, P.CAUSE_PREEMPTION)])
def test_the_warnings_cause(notice, moved, cause):
    assert warning.warning_cause(notice=notice, end_time_moved=moved) == cause


def test_slurm_counting_a_restart_more_is_a_requeue_not_a_cancel():
    view = warning.slurm_view("PENDING", "BeginTime", None, terminated=True, deadline_s=100,
                              restarts=2, restart=1)
    assert view.requeued and not view.cancelled
    same = warning.slurm_view("CANCELLED", "", None, terminated=True, deadline_s=100,
                              restarts=1, restart=1)
    assert same.cancelled and not same.requeued


# ---- the endings ----------------------------------------------------------------------------------

OK = RankExit(0, 1000)
LIMITS = Limits(ntasks=2, step_nodes=1, max_requeues=3, max_preemptions=5)


def facts(**changes) -> StepFacts:  # noqa: ANN003
    base = {"rc": 0, "exits": (OK, OK), "joined": (None, None)}
    base.update(changes)
    return StepFacts(**base)


def test_a_program_that_saved_on_the_forwarded_warning_and_exited_0_is_requeued():
    action = ending(facts(warnings=1, handled_warning=True), History(), LIMITS, requeue_id="7")
    assert action.requeue and "took the warning itself" in action.log[0]


def test_the_programs_own_requeue_is_recorded_once_and_not_made_again():
    action = ending(facts(rc=143, warnings=1, handled_warning=True, requeued_by_program=True,
                          latest_checkpoint=None), History(), LIMITS)
    assert action.already_requeued and not action.requeue and action.rc == 0
    assert action.requeue_fields["by"] == P.REQUEUED_BY_PROGRAM


def test_a_preemption_requeue_counts_against_max_preemptions_only():
    history = History(restart=4, requeues=4, preemption_requeues=4)
    spot = ending(facts(warnings=1, handled_warning=True, cause=P.CAUSE_PREEMPTION), history,
                  LIMITS, requeue_id="7")
    assert spot.requeue
    assert "preemption 5 of at most 5" in spot.log[0]
    assert requeues_used(history, LIMITS, P.CAUSE_TIME_LIMIT) == 0
    full = History(restart=5, requeues=5, preemption_requeues=5)
    stop = ending(facts(warnings=1, handled_warning=True, cause=P.CAUSE_PREEMPTION), full, LIMITS)
    assert not stop.requeue and stop.reason == P.REASON_REQUEUE_LIMIT and stop.rc == P.EXIT_UNFINISHED
    assert "preemption.max_preemptions" in stop.log[0]


def test_time_limit_requeues_do_not_use_the_preemption_budget():
    history = History(restart=3, requeues=3)
    action = ending(facts(stopped_unaware=True, warnings=1), history, LIMITS)
    assert not action.requeue and action.reason == P.REASON_REQUEUE_LIMIT
    assert requeues_used(history, LIMITS, P.CAUSE_PREEMPTION) == 0


def test_with_resilience_off_slurms_restarts_count_but_preemptions_do_not():
    history = History(restart=3, requeues=2, preemption_requeues=2)
    assert requeues_used(history, LIMITS, P.CAUSE_TIME_LIMIT) == 1


@pytest.mark.parametrize(("reason", "rc", "status"), [
    pytest.param(P.REASON_COMPLETED, 0, 0, id="completed"),
    pytest.param(P.REASON_COMPLETED_AFTER_DONE, 134, 0, id="completed-after-done"),
    pytest.param(P.REASON_REQUEUE_LIMIT, 0, P.EXIT_UNFINISHED, id="requeue-limit-exit-0"),
    pytest.param(P.REASON_REQUEUE_LIMIT, 75, 75, id="requeue-limit-after-commit"),
    pytest.param(P.REASON_PROGRAM_ERROR, 1, 1, id="program-error"),
    pytest.param(P.REASON_FAILURE_LIMIT, 0, P.EXIT_UNFINISHED, id="hang-used-its-restarts"),
    pytest.param(P.REASON_PREEMPTED_NO_CHECKPOINT, 0, P.EXIT_UNFINISHED, id="warned-no-checkpoint"),
    pytest.param(P.REASON_REQUEUE_FAILED, 0, P.EXIT_UNFINISHED, id="requeue-failed"),
    pytest.param(P.REASON_REQUEUE_DISABLED, 0, P.EXIT_UNFINISHED, id="requeue-disabled"),
    pytest.param(P.REASON_RANK_KILLED, 137, 137, id="rank-killed"),
    pytest.param(P.REASON_CANCELLED, 0, 0, id="cancelled-slurm-says-cancelled"),
    pytest.param(P.REASON_TIME_LIMIT, 0, 0, id="time-limit-slurm-says-timeout"),
])
def test_the_exit_status_of_every_ending(reason, rc, status):
    assert exit_status(reason, rc) == status


def test_no_unfinished_ending_of_the_ladder_exits_0():
    stuck = ending(facts(warnings=1, handled_warning=True), History(restart=3, requeues=3), LIMITS)
    assert stuck.reason == P.REASON_REQUEUE_LIMIT and stuck.rc != 0
    no_commit = ending(facts(rc=1, warnings=1, joined=("n1", "n1")), History(), LIMITS)
    assert no_commit.reason == P.REASON_PREEMPTED_NO_CHECKPOINT and no_commit.rc != 0


def test_a_program_requeue_past_its_budget_ends_the_next_attempt_at_its_start():
    from hpcflow.supervisor.endings import attempt_start

    used = History(restart=3, requeues=3)
    action = ending(facts(rc=143, warnings=1, handled_warning=True, requeued_by_program=True),
                    used, LIMITS)
    assert action.already_requeued and action.requeue_fields["over_budget"] is True
    event = {"event": P.EVENT_REQUEUE, **action.requeue_fields}
    start = attempt_start(History.from_events([event], restart=4), LIMITS, ["n1"])
    assert not start.start and start.reason == P.REASON_REQUEUE_LIMIT
    assert attempt_start(History.from_events([{**event, "over_budget": False}], 4), LIMITS,
                         ["n1"]).start


def test_an_attempt_a_preemption_warned_counts_its_requeue_as_a_preemption():
    events = [{"event": "signal", "restart": 0, "cause": P.CAUSE_PREEMPTION},
              {"event": "requeue", "restart": 0, "step": 4},
              {"event": "signal", "restart": 1, "source": P.SOURCE_SLURM_PREEMPT},
              {"event": "requeue", "restart": 1, "step": 9},
              {"event": "spot_notice", "restart": 2},
              {"event": "requeue", "restart": 2, "step": 12},
              {"event": "signal", "restart": 3, "cause": P.CAUSE_TIME_LIMIT},
              {"event": "requeue", "restart": 3, "step": 15},
              {"event": "requeue", "restart": 4, "step": 18}]  # protocol 4: no cause on record
    history = History.from_events(events, restart=5)
    assert history.preemption_requeues == 3
    assert requeues_used(history, LIMITS, P.CAUSE_TIME_LIMIT) == 2
