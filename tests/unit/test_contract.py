"""hpcflow.contract: a record line decodes to a value of its kinds or is refused, never raises."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hpcflow import contract, ledger
from hpcflow import protocol as P

DEEP = "[" * 100_000 + "]" * 100_000


@pytest.mark.parametrize("text", [
    pytest.param(DEEP, id="array-100000-deep"),
    pytest.param('{"a":' * 100_000 + "1" + "}" * 100_000, id="object-100000-deep"),
    pytest.param("[" * (contract.MAX_DEPTH + 1) + "]" * (contract.MAX_DEPTH + 1),
                 id="one-past-the-bound"),
    pytest.param('"' + "x" * (contract.MAX_LINE_CHARS + 1) + '"', id="too-long"),
    pytest.param("{not json", id="not-json"),
])
def test_a_line_too_deep_long_or_broken_is_a_value_error(text):
    with pytest.raises(ValueError):
        contract.loads_bounded(text)


def test_brackets_inside_strings_do_not_count_as_depth():
    text = json.dumps({"traceback": "[" * 1000 + "{" * 1000})
    assert contract.loads_bounded(text) == {"traceback": "[" * 1000 + "{" * 1000}


def _event(**fields):
    return {"event": P.EVENT_STEP_END, "time": 1.0, "job_id": "7", "restart": 0, **fields}


@pytest.mark.parametrize("fields", [
    pytest.param({"restart": "1"}, id="restart-a-string"),
    pytest.param({"restart": None}, id="restart-null"),
    pytest.param({"restart": float("inf")}, id="restart-1e400"),
    pytest.param({"restart": True}, id="restart-a-boolean"),
    pytest.param({"restart": -1}, id="restart-negative"),
    pytest.param({"time": "noon"}, id="time-text"),
    pytest.param({"time": True}, id="time-a-boolean"),
    pytest.param({"time": 2.0**60}, id="time-past-2-53"),
    pytest.param({"rc": [1]}, id="exit-status-a-list"),
    pytest.param({"ranks_exited": "2"}, id="ranks-exited-text"),
    pytest.param({"first_failure": 3}, id="first-failure-a-number"),
])
def test_an_event_member_of_the_wrong_kind_refuses_the_event(fields):
    assert contract.decode_event(_event(**fields)) is None


def test_a_well_formed_event_decodes_unchanged_and_missing_members_take_the_defaults():
    assert contract.decode_event(_event(rc=0)) == _event(rc=0)
    assert contract.decode_event({"event": "attempt_start", "job_id": 5}) == {
        "event": "attempt_start", "job_id": "5", "time": 0, "restart": 0}
    assert contract.decode_event({"event": "from_a_newer_writer", "x": [1]})["x"] == [1]


@pytest.mark.parametrize("tag, payload, ok", [
    pytest.param(P.TAG_STEP, {"step": "x"}, False, id="step-text"),
    pytest.param(P.TAG_STEP, {"step": float("inf")}, False, id="step-1e400"),
    pytest.param(P.TAG_STEP, {"step": 3, "step_time_s": True}, False, id="time-a-boolean"),
    pytest.param(P.TAG_RESUME, {"step": None}, False, id="resume-null"),
    pytest.param(P.TAG_CHECKPOINT, {"save_s": "1"}, False, id="save-text"),
    pytest.param(P.TAG_STEP, {"step": 3, "step_time_s": 0.5}, True, id="good-step"),
])
def test_tagged_lines_are_typed(tag, payload, ok):
    assert (contract.decode_tagged(tag, payload) is not None) is ok


@settings(max_examples=300, deadline=None, database=None)
@given(st.binary(max_size=400))
def test_any_bytes_decode_to_events_or_counted_skips(raw):
    lines = raw.decode("utf-8", errors="replace").splitlines()
    decoded = contract.decode_events(lines)
    assert decoded.skipped + len(decoded.events) == sum(1 for ln in lines if ln.strip())
    for event in decoded.events:
        assert isinstance(event["event"], str) and contract.is_number(event["time"])


def test_the_ledger_readers_skip_a_deep_line_and_count_it(tmp_path):
    path = tmp_path / "events.jsonl"
    good = ledger.event_line(P.EVENT_ATTEMPT_START, job_id="7", restart=0, time_s=5)
    path.write_text(good + DEEP + "\n" + '{"event": "job_end", "job_id": "7", "rc": [1]}\n')
    assert [e["event"] for e in ledger.read_events(path)] == ["attempt_start", "job_end"]
    decoded = ledger.read_ledger(path, job_id="7")
    assert [e["event"] for e in decoded.events] == ["attempt_start"]
    assert decoded.skipped == 2


def _rendered(**changes):
    from hpcflow.slurm.render import supervisor_config
    from hpcflow.spec.job import JobSpec

    spec = JobSpec.model_validate({"name": "t", "run_dir": "/scratch/t", "time_limit": "60",
                                   "nodes": 2, "tasks_per_node": 4,
                                   "program": {"argv": ["python3", "train.py"]}, **changes})
    return json.loads(supervisor_config(spec, python="/venv/bin/python"))


@pytest.mark.parametrize("changes", [
    pytest.param({}, id="default"),
    pytest.param({"resilience": False}, id="no-resilience"),
    pytest.param({"launcher": "torchrun"}, id="torchrun"),
    pytest.param({"checkpoint": {"s3_uri": "s3://my-bucket/ckpt"}}, id="mirror"),
    pytest.param({"resilience": {"warm_standby": True}}, id="warm-standby"),
])
def test_the_supervisor_settings_round_trip_through_their_json_form(changes):
    raw = _rendered(**changes)
    settings = contract.SupervisorSettings.decode(raw)
    assert json.loads(json.dumps(settings.encode())) == raw
    assert settings.ntasks == 8 and settings.step.program[-1] == "train.py"


@pytest.mark.parametrize("member, value", [
    pytest.param("ntasks", "8", id="ntasks-text"),
    pytest.param("ntasks", True, id="ntasks-a-boolean"),
    pytest.param("resilience", 1, id="resilience-a-number"),
    pytest.param("step", [], id="step-a-list"),
    pytest.param("env", "A=1", id="env-text"),
])
def test_a_setting_of_the_wrong_kind_is_refused_by_name(member, value):
    raw = {**_rendered(), member: value}
    with pytest.raises(ValueError, match=f"supervisor setting '{member}'"):
        contract.SupervisorSettings.decode(raw)


def test_a_job_needs_its_limits_and_a_part_takes_defaults():
    raw = _rendered()
    del raw["ntasks"]
    with pytest.raises(ValueError, match="lack ntasks"):
        contract.SupervisorSettings.decode(raw, required=contract.REQUIRED_SETTINGS)
    part = contract.SupervisorSettings.decode({"warm_standby": True})
    assert part.launcher == "srun" and part.step is None and part.max_preemptions == 0


@pytest.mark.parametrize("record", [
    pytest.param(contract.GoRecord(env={"A": "1", "HPCFLOW_STEP_TRY": "2"}), id="env"),
    pytest.param(contract.GoRecord(quit=True), id="quit"),
])
def test_the_go_record_has_one_encoder_and_one_decoder(record):
    assert contract.GoRecord.decode(record.encode()) == record
    assert json.loads(record.encode()) == record.as_dict()


@pytest.mark.parametrize("text", ['{"env": ', "[]", '{"env": "A=1"}', DEEP, ""])
def test_a_go_file_that_is_not_whole_reads_as_none(text):
    assert contract.GoRecord.decode(text) is None


@pytest.mark.parametrize("event", [
    pytest.param({"event": P.EVENT_STEP_END, "rc": 0, "ranks_exited": 2, "ranks_missing": 0,
                  "missing": [], "first_failure": None, "node": None}, id="step-end-nulls"),
    pytest.param({"event": P.EVENT_REQUEUE, "step": None, "checkpoint": False, "cause": None},
                 id="requeue-without-a-checkpoint"),
    pytest.param({"event": P.EVENT_SIGNAL, "signal": "USR1", "cause": None, "deadline": 5},
                 id="signal-without-a-cause"),
    pytest.param({"event": P.EVENT_NETWORK, "summary": "NCCL over EFA", "problems": [],
                  "fix": None, "stopped": False}, id="network"),
])
def test_what_the_writers_write_decodes(event):
    line = ledger.event_line(event.pop("event"), job_id="7", restart=1, time_s=5, **event)
    decoded = contract.decode_events([line])
    assert decoded.skipped == 0 and len(decoded.events) == 1


@pytest.mark.parametrize("changes", [
    pytest.param({}, id="default"),
    pytest.param({"checkpoint": {"interval_steps": 50}, "parallelism": {"dp": -1, "pp": 2,
                                                                        "tp": 1}},
                 id="fixed-interval-and-parallelism"),
])
def test_the_spec_env_is_typed_and_its_json_form_is_the_variables(changes):
    variables = _rendered(**changes)["env"]
    env = contract.SpecEnv.decode(variables)
    assert env.variables() == variables
    if changes:
        assert env.checkpoint_interval == 50 and env.parallelism == (-1, 2, 1)
        assert env.failures_per_node_hour is None
    else:
        assert env.checkpoint_interval == P.CHECKPOINT_INTERVAL_AUTO
        assert env.failures_per_node_hour == P.DEFAULT_FAILURES_PER_NODE_HOUR


@pytest.mark.parametrize("variables, says", [
    pytest.param({"HPCFLOW_CHECKPOINT_KEEP": "two"}, "HPCFLOW_CHECKPOINT_KEEP='two'", id="keep"),
    pytest.param({"HPCFLOW_CHECKPOINT_INTERVAL": "-3"}, "HPCFLOW_CHECKPOINT_INTERVAL",
                 id="negative-interval"),
    pytest.param({"HPCFLOW_FAILURES_PER_NODE_HOUR": "nan"}, "HPCFLOW_FAILURES_PER_NODE_HOUR",
                 id="rate-nan"),
    pytest.param({"HPCFLOW_PARALLELISM": "1,2"}, "HPCFLOW_PARALLELISM", id="parallelism"),
    pytest.param({"PATH": "/bin"}, "'PATH' is not one of", id="not-hpcflows"),
    pytest.param({"HPCFLOW_MAX_REQUEUES": 3}, "is not text", id="a-number"),
])
def test_a_spec_env_variable_of_the_wrong_form_is_refused_by_name(variables, says):
    with pytest.raises(ValueError, match="supervisor setting 'env'") as info:
        contract.SupervisorSettings.decode({**_rendered(), "env": variables})
    assert says in str(info.value)


def test_the_step_env_names_each_member_once():
    env = contract.StepEnv(
        spec=contract.SpecEnv(checkpoint_interval=0, checkpoint_keep=2, max_requeues=3),
        preempt_flag="/r/flag", preempt_committed="/r/committed", joined_dir="/r/joined",
        step_try=1, error_dir="/r/errors", attempt_t0=1700000000.5, warm_modules="/r/mods",
        heartbeat_dir="/r/beats", heartbeat_interval_s=2)
    assert env.attempt_variables() == {
        P.ENV_CHECKPOINT_INTERVAL: "0", P.ENV_CHECKPOINT_KEEP: "2", P.ENV_MAX_REQUEUES: "3",
        P.ENV_PREEMPT_FLAG: "/r/flag", P.ENV_PREEMPT_COMMITTED: "/r/committed",
        P.ENV_JOINED_DIR: "/r/joined"}
    assert env.try_variables() == {
        P.ENV_STEP_TRY: "1", P.ENV_ERROR_DIR: "/r/errors",
        P.ENV_ATTEMPT_T0: "1700000000.500000", P.ENV_WARM_MODULES: "/r/mods",
        P.ENV_HEARTBEAT_DIR: "/r/beats", P.ENV_HEARTBEAT_INTERVAL_S: "2"}
    assert env.variables() == {**env.attempt_variables(), **env.try_variables()}
