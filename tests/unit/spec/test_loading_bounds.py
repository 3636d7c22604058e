"""Hostile spec files: alias bombs, recursive anchors, endless files, deep nesting, huge
integers and lone surrogates end in a SpecError naming the file or field, never a crash."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from hpcflow.errors import SpecError
from hpcflow.spec.job import MAX_NODES, MAX_REQUEUES, load_job_spec
from hpcflow.spec.loading import (
    MAX_SPEC_BYTES,
    MAX_SPEC_DEPTH,
    MAX_SPEC_NODES,
    apply_overrides,
    load_yaml_bounded,
    parse_yaml_bounded,
)

BASE = "name: j\ntime_limit: '10'\nrun_dir: /r\nprogram: {argv: [/bin/true]}\n"


def bomb(levels: int = 9, width: int = 9) -> str:
    """The "billion laughs" file: each anchor lists the previous one ``width`` times."""
    lines = ['a0: &a0 ["lol"]']
    for i in range(1, levels + 1):
        refs = ", ".join([f"*a{i - 1}"] * width)
        lines.append(f"a{i}: &a{i} [{refs}]")
    return "\n".join(lines) + "\n"


def problems(tmp_path: Path, text: str, overrides: tuple[str, ...] = ()) -> str:
    path = tmp_path / "job.yaml"
    path.write_text(text, encoding="utf-8", errors="surrogatepass")
    with pytest.raises(SpecError) as info:
        load_job_spec(path, overrides)
    return str(info.value)


def test_an_alias_bomb_is_refused_quickly(tmp_path: Path) -> None:
    text = BASE + "env:\n  X: " + "y\n" + bomb()
    assert len(text) < 1000  # expands to 9**9 (~3.9e8) strings
    start = time.monotonic()
    message = problems(tmp_path, text)
    assert time.monotonic() - start < 2
    assert f"more than {MAX_SPEC_NODES} values" in message and "anchors and aliases" in message
    assert str(tmp_path / "job.yaml") in message


def test_a_small_alias_use_is_fine() -> None:
    text = "a: &x [1, 2]\nb: *x\nc: {<<: {k: v}, m: n}\n"
    assert parse_yaml_bounded(text, "f") == {"a": [1, 2], "b": [1, 2], "c": {"k": "v", "m": "n"}}


def test_a_merge_key_bomb_is_refused() -> None:
    lines = ["m0: &m0 {k: v}"] + [f"m{i}: &m{i} {{<<: [*m{i - 1}, *m{i - 1}], k{i}: v}}"
                                 for i in range(1, 30)]
    with pytest.raises(SpecError, match="more than"):
        parse_yaml_bounded("\n".join(lines), "f")


@pytest.mark.parametrize("text", ["a: &a [*a]\n", "a: &a {b: *a}\n", "&a [x, *a]\n"])
def test_a_recursive_anchor_is_refused(text: str) -> None:
    with pytest.raises(SpecError, match="used inside itself"):
        parse_yaml_bounded(text, "f")


def test_an_endless_file_is_read_only_up_to_the_bound() -> None:
    start = time.monotonic()
    with pytest.raises(SpecError, match=f"larger than {MAX_SPEC_BYTES} bytes"):
        load_yaml_bounded("/dev/zero")
    assert time.monotonic() - start < 2


def test_a_file_over_the_byte_bound_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "big.yaml"
    path.write_text("# " + "x" * MAX_SPEC_BYTES + "\n")
    with pytest.raises(SpecError, match="larger than"):
        load_job_spec(path)
    path.write_text(BASE + "# " + "x" * (MAX_SPEC_BYTES - 200) + "\n")
    assert load_job_spec(path).name == "j"


def test_a_file_that_is_not_utf8_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "job.yaml"
    path.write_bytes(BASE.encode() + b"env: {X: \xff}\n")
    with pytest.raises(SpecError, match="not UTF-8"):
        load_job_spec(path)


# ---- crashes that are exit 2 with the field named -------------------------------------------


def test_a_5000_digit_integer_names_its_field(tmp_path: Path) -> None:
    message = problems(tmp_path, BASE + "nodes: " + "9" * 5000 + "\n")
    assert "job.yaml: nodes: '9999" in message
    assert "an integer of 5,000 digits is out of range: at most 100,000" in message
    assert len(message) < 1000


def test_a_5000_digit_integer_through_set_names_its_field(tmp_path: Path) -> None:
    message = problems(tmp_path, BASE, ("preemption.max_requeues=" + "9" * 5000,))
    assert "preemption.max_requeues: '9999" in message


def test_an_integer_of_400_digits_meets_the_upper_bound(tmp_path: Path) -> None:
    message = problems(tmp_path, BASE + "nodes: 1" + "0" * 400 + "\n")
    assert "nodes: <an integer of about 401 digits>" in message
    assert f"less than or equal to {MAX_NODES}" in message


@pytest.mark.parametrize(
    ("line", "field", "bound"),
    [
        pytest.param("nodes: 100000000000000000000", "nodes", MAX_NODES, id="nodes-1e20"),
        pytest.param(f"preemption: {{max_requeues: {2**70}}}", "preemption.max_requeues",
                     MAX_REQUEUES, id="requeues-2**70-wraps-in-bash"),
        pytest.param("tasks_per_node: 70000", "tasks_per_node", 65533, id="tasks"),
        pytest.param("cpus_per_task: 100000", "cpus_per_task", 4096, id="cpus"),
        pytest.param("gpus_per_node: 65", "gpus_per_node", 64, id="gpus"),
    ],
)
def test_integers_have_upper_bounds(tmp_path: Path, line: str, field: str, bound: int) -> None:
    message = problems(tmp_path, BASE + line + "\n")
    assert f"job.yaml: {field}: " in message and f"less than or equal to {bound}" in message


def test_a_time_limit_of_5000_digits_or_over_a_year_is_refused(tmp_path: Path) -> None:
    message = problems(tmp_path, BASE.replace("'10'", "'" + "9" * 5000 + "'"))
    assert "time_limit: " in message and "too long" in message
    message = problems(tmp_path, BASE.replace("'10'", "'400-00'"))
    assert "time_limit: '400-00'" in message and "at most 365 days" in message


@pytest.mark.parametrize("depth", [MAX_SPEC_DEPTH + 1, 5000])
def test_deep_nesting_is_refused(tmp_path: Path, depth: int) -> None:
    message = problems(tmp_path, BASE + "env: {X: " + "[" * depth + "]" * depth + "}\n")
    assert f"nested deeper than {MAX_SPEC_DEPTH} levels" in message and "line 5" in message


def test_deep_nesting_through_set_is_refused(tmp_path: Path) -> None:
    message = problems(tmp_path, BASE, ("program.args=" + "[" * 5000 + "]" * 5000,))
    assert "--set program.args" in message and "nested deeper" in message


def test_aliases_that_nest_past_the_depth_bound_are_refused() -> None:
    lines = ["l0: &l0 [x]"] + [f"l{i}: &l{i} [*l{i - 1}]" for i in range(1, MAX_SPEC_DEPTH + 2)]
    with pytest.raises(SpecError, match="nested deeper than .* once YAML aliases are expanded"):
        parse_yaml_bounded("\n".join(lines), "f")


def test_a_lone_surrogate_names_its_field(tmp_path: Path) -> None:
    message = problems(tmp_path, BASE + 'env: {X: "a\\ud800b"}\n')
    assert "job.yaml: env.X: 'a\\ud800b': not valid Unicode text" in message
    message = problems(tmp_path, BASE, ("env.Y=\udcff",))
    assert "env.Y: '\\udcff': not valid Unicode" in message


def test_a_lone_surrogate_in_a_key_is_refused(tmp_path: Path) -> None:
    message = problems(tmp_path, BASE + 'env: {"\\ud800": x}\n')
    assert "env['\\ud800']: the key is not valid Unicode" in message


@pytest.mark.parametrize(
    ("field", "value"),
    [
        pytest.param("run_dir", "/r/" + "a" * 300, id="run-dir-component"),
        pytest.param("run_dir", "/r" + "/abcdefgh" * 500, id="run-dir-total"),
        pytest.param("checkpoint.dir", "/c/" + "a" * 300, id="checkpoint-dir"),
    ],
)
def test_a_path_longer_than_linux_allows_names_its_field(tmp_path: Path, field: str,
                                                        value: str) -> None:
    message = problems(tmp_path, BASE, (f"{field}={value}",))
    assert f"{field}: " in message and "NAME_MAX" in message


def test_a_long_environment_value_is_refused(tmp_path: Path) -> None:
    message = problems(tmp_path, BASE + "env: {X: " + "x" * 40000 + "}\n")
    assert "env.X: " in message and "MAX_ARG_STRLEN" in message


def test_without_overrides_the_data_is_not_deep_copied() -> None:
    shared = ["x"]
    data = {"a": shared}
    assert apply_overrides(data, [])["a"] is shared
