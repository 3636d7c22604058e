"""load_yaml_bounded: YAML aliases cannot expand a small file into a huge document."""

import time

import pytest

from hpcflow.errors import SpecError
from hpcflow.spec.loading import load_yaml_bounded

# The "billion laughs" document: 9 levels of 9-fold repetition, about 10^9 items, 800 bytes.
BOMB = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{chr(98 + i)}: &{chr(98 + i)} [" + ", ".join([f"*{chr(97 + i)}"] * 9) + "]\n"
    for i in range(8))


def test_alias_bomb_is_refused_quickly_without_building_it():
    assert len(BOMB) < 1000
    start = time.monotonic()
    with pytest.raises(SpecError) as err:
        load_yaml_bounded(BOMB, max_nodes=100_000, source="c.yaml")
    assert time.monotonic() - start < 2
    assert str(err.value).startswith("c.yaml: the YAML expands to more than 100,000 values")


def test_aliases_within_the_bound_load_as_usual():
    text = "base: &b {x: 1, y: [1, 2]}\none: *b\ntwo: *b\n"
    assert load_yaml_bounded(text, max_nodes=100) == {
        "base": {"x": 1, "y": [1, 2]}, "one": {"x": 1, "y": [1, 2]}, "two": {"x": 1, "y": [1, 2]}}


def test_the_bound_counts_every_expanded_copy():
    text = "a: &a [1, 2, 3]\nb: [*a, *a, *a]\n"  # mapping 1, keys 2, [1, 2, 3] 4, [*a, *a, *a] 1 + 3 * 4: 20
    assert load_yaml_bounded(text, max_nodes=20) == {"a": [1, 2, 3], "b": [[1, 2, 3]] * 3}
    with pytest.raises(SpecError, match="expands to more than 19 values"):
        load_yaml_bounded(text, max_nodes=19)


@pytest.mark.parametrize(("text", "needle"), [
    pytest.param("a: 1\na: 2\n", "key 'a' is given twice", id="duplicate-key"),
    pytest.param("a: [1,\n", "not valid YAML (line", id="syntax"),
    pytest.param("a: &x [*x]\n", "recursive YAML is not allowed", id="recursive-alias"),
    pytest.param("[" * 5000 + "]" * 5000, "nested too deeply", id="deep-nesting"),
])
def test_bad_documents_are_spec_errors_naming_the_source(text, needle):
    with pytest.raises(SpecError) as err:
        load_yaml_bounded(text, max_nodes=10**6, source="s.yaml")
    assert needle in str(err.value) and str(err.value).startswith("s.yaml: ")


def test_empty_document_is_none():
    assert load_yaml_bounded("", max_nodes=1) is None
