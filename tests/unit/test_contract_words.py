"""The contract's words live in hpcflow.protocol alone: no module outside it compares what it
read from the ledger (an event's ``event``, ``reason``, ``by``, ``cause``, ``source`` member, or
a name bound to one: ``kind``, ``reason``) against a bare event or reason word. A typo there
(``"job_ned"``) would silently never match; a name in hpcflow.protocol fails at import."""

from __future__ import annotations

import ast
from pathlib import Path

from hpcflow import protocol as P

PKG = Path(__file__).resolve().parents[2] / "hpcflow"


def module_files(module: object) -> list[Path]:
    """The files of a module, or of every module of a package."""
    path = Path(module.__file__)  # type: ignore[attr-defined]
    return sorted(path.parent.rglob("*.py")) if path.name == "__init__.py" else [path]


#: The only place a protocol word may be spelled: hpcflow.protocol itself.
PROTOCOL_FILES = set(module_files(P))
WORDS = {v for k, v in vars(P).items()
         if k.startswith(("EVENT_", "REASON_")) and isinstance(v, str)}
#: Members of a ledger event whose values are protocol words, and names code binds them to.
MEMBERS = {"event", "reason", "by", "cause", "source"}
NAMES = {"kind", "reason"}


def _reads_a_word(node: ast.AST) -> bool:
    """``x.get("event")``, ``x["event"]`` (any member of :data:`MEMBERS`) or a name in
    :data:`NAMES`."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
            and node.func.attr == "get" and node.args \
            and isinstance(node.args[0], ast.Constant) and node.args[0].value in MEMBERS:
        return True
    if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant) \
            and node.slice.value in MEMBERS:
        return True
    return isinstance(node, ast.Name) and node.id in NAMES


def _bare_words(node: ast.Compare) -> list[str]:
    out = []
    for part in (node.left, *node.comparators):
        elts = part.elts if isinstance(part, (ast.Tuple, ast.Set, ast.List)) else [part]
        out += [e.value for e in elts if isinstance(e, ast.Constant) and e.value in WORDS]
    return out


def bare_word_comparisons(source: str) -> list[tuple[int, str]]:
    """``(line, word)`` of each comparison of a ledger read against a bare protocol word."""
    hits = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare) and any(
                _reads_a_word(p) for p in (node.left, *node.comparators)):
            hits += [(node.lineno, word) for word in _bare_words(node)]
    return hits


def test_the_check_sees_a_bare_word():
    assert bare_word_comparisons('if ev.get("event") == "job_end": pass') == [(1, "job_end")]
    assert bare_word_comparisons('x = kind in ("requeue", "job_end")') == [
        (1, "requeue"), (1, "job_end")]
    assert bare_word_comparisons('if ev["reason"] != "completed": pass') == [(1, "completed")]
    assert bare_word_comparisons('if ev.get("event") == P.EVENT_JOB_END: pass') == []


def scanned() -> list[Path]:
    """Every module of the package but :data:`PROTOCOL_FILES`."""
    return [path for path in sorted(PKG.rglob("*.py")) if path not in PROTOCOL_FILES]


def test_the_scan_reaches_every_module_but_the_protocols_own():
    from hpcflow import contract, ledger
    from hpcflow.supervisor import commands

    files = set(scanned())
    for module in (contract, ledger, commands):
        assert set(module_files(module)) <= files
    assert PROTOCOL_FILES and not PROTOCOL_FILES & files


def test_no_module_compares_a_ledger_read_against_a_bare_word():
    offenders = {}
    for path in scanned():
        if hits := bare_word_comparisons(path.read_text(encoding="utf-8")):
            offenders[str(path.relative_to(PKG))] = hits
    assert offenders == {}


def shadow_defaults(source: str, fields: set[str]) -> list[tuple[int, str]]:
    """``(line, member)`` of each ``cfg.get("member", default)`` (or ``x.cfg.get(...)``) of a
    contract field: a second default beside the one the contract's record holds."""
    hits = []
    for node in ast.walk(ast.parse(source)):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr == "get" and node.args
                and isinstance(node.args[0], ast.Constant) and node.args[0].value in fields):
            continue
        owner = node.func.value
        name = owner.id if isinstance(owner, ast.Name) else \
            owner.attr if isinstance(owner, ast.Attribute) else ""
        if name in ("cfg", "config", "settings"):
            hits.append((node.lineno, node.args[0].value))
    return hits


def test_the_shadow_default_check_sees_one():
    fields = {"launcher"}
    assert shadow_defaults('x = cfg.get("launcher", "srun")', fields) == [(1, "launcher")]
    assert shadow_defaults('x = self.job.cfg.get("launcher")', fields) == [(1, "launcher")]
    assert shadow_defaults('x = cfg.launcher', fields) == []


def test_no_module_reads_a_setting_with_a_default_of_its_own():
    """Any member of a settings record that crosses a process boundary: the supervisor's, the
    step's, torchrun's, the watchdog's, the mirror's, the spec's environment."""
    from dataclasses import fields

    from hpcflow import contract

    records = (contract.SupervisorSettings, contract.StepSettings, contract.TorchrunSettings,
               contract.WatchdogSettings, contract.MirrorSettings, contract.SpecEnv)
    names = {f.name for record in records for f in fields(record)}
    assert {"launcher", "kill_after_s", "s3_uri", "checkpoint_keep"} <= names
    offenders = {}
    for path in sorted(PKG.rglob("*.py")):
        if hits := shadow_defaults(path.read_text(encoding="utf-8"), names):
            offenders[str(path.relative_to(PKG))] = hits
    assert offenders == {}
