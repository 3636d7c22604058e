"""Import hygiene: the CLI stays light and runtime code never reaches the CLI."""

import ast
import json
import subprocess
import sys
from pathlib import Path

PKG = Path(__file__).resolve().parents[2] / "hpcflow"
HEAVY = ["torch", "boto3", "botocore", "pcluster", "fabric", "paramiko", "numpy", "submitit"]


def test_cli_help_imports_no_heavy_library():
    code = (
        "import sys, json\n"
        "from click.testing import CliRunner\n"
        "from hpcflow.cli.main import cli\n"
        "r = CliRunner().invoke(cli, ['--help'])\n"
        "assert r.exit_code == 0, r.output\n"
        f"print(json.dumps([m for m in {HEAVY!r} if m in sys.modules]))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert json.loads(out.stdout.strip().splitlines()[-1]) == []


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


def test_runtime_never_imports_cli_or_services():
    offenders = {}
    for path in (PKG / "runtime").rglob("*.py"):
        # The hostlist parser the ranks need (SLURM_JOB_NODELIST) is a core module,
        # hpcflow.hostlist, not a part of slurm/.
        bad = {m for m in _imports(path) if m.startswith(("hpcflow.cli", "hpcflow.jobs",
                                                          "hpcflow.slurm", "hpcflow.pcluster",
                                                          "hpcflow.supervisor", "hpcflow.spec"))}
        if bad:
            offenders[str(path.relative_to(PKG))] = sorted(bad)
    assert offenders == {}


def test_the_core_hostlist_parser_imports_nothing_of_hpcflow():
    assert {m for m in _imports(PKG / "hostlist.py") if m.startswith("hpcflow")} == set()


def test_the_nccl_log_parser_the_runtime_takes_imports_nothing_of_hpcflow():
    assert _imports(PKG / "nccl" / "__init__.py") == set()
    assert {m for m in _imports(PKG / "nccl" / "netlog.py") if m.startswith("hpcflow")} == set()


def test_library_layers_never_import_the_cli():
    offenders = {}
    for path in PKG.rglob("*.py"):
        rel = path.relative_to(PKG)
        if rel.parts[0] == "cli" or rel.name == "__main__.py":
            continue
        bad = {m for m in _imports(path) if m.startswith("hpcflow.cli")}
        if bad:
            offenders[str(rel)] = sorted(bad)
    assert offenders == {}


CORE = ("spec", "slurm", "plan", "protocol", "contract", "ending_kinds", "ledger", "hostlist",
        "command", "fsutil", "errors", "check_result")


def _files(top: str) -> list[Path]:
    """The files of the module or package ``top`` of hpcflow (one of them must exist)."""
    if (PKG / top).is_dir():
        return sorted((PKG / top).rglob("*.py"))
    assert (PKG / f"{top}.py").is_file(), top
    return [PKG / f"{top}.py"]
SERVICES = ("jobs", "launch", "local_cluster", "pcluster", "aws", "remote", "doctor", "nccl",
            "mirror", "spot", "watchdog", "supervisor", "hyperpod", "sagemaker")


def test_core_imports_no_service_and_no_cli():
    """docs/architecture.md, "Import direction": cli -> services -> core, no exception. What a
    service computes for the core (the NCCL/EFA preset) is passed in, not imported."""
    layer_above = tuple(f"hpcflow.{name}" for name in (*SERVICES, "cli"))
    offenders = {}
    for top in CORE:
        for path in _files(top):
            bad = sorted(m for m in _imports(path) if m.startswith(layer_above))
            if bad:
                offenders[str(path.relative_to(PKG))] = bad
    assert offenders == {}


def test_the_nccl_checks_never_import_doctor():
    """doctor runs the NCCL checks (doctor -> nccl); both return the core's CheckResult, so
    nccl never reaches back into doctor."""
    offenders = {}
    for path in sorted((PKG / "nccl").rglob("*.py")):
        bad = sorted(m for m in _imports(path) if m.startswith("hpcflow.doctor"))
        if bad:
            offenders[str(path.relative_to(PKG))] = bad
    assert offenders == {}


def test_the_spec_modules_import_no_private_name_of_each_other():
    """docs/architecture.md: a module's private (``_``) names are its own."""
    offenders = {}
    for path in sorted((PKG / "spec").glob("*.py")):
        tree = ast.parse(path.read_text())
        bad = sorted(f"{node.module}.{a.name}" for node in ast.walk(tree)
                     if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(
                         "hpcflow.spec") for a in node.names
                     if a.name.startswith("_"))
        if bad:
            offenders[path.name] = bad
    assert offenders == {}


def test_the_contract_and_its_words_import_only_each_other():
    """The supervisor, the watchdog and the in-job runtime import them: standard library only
    (no pydantic, no spec), so every side reads the same records."""
    offenders = {}
    for top in ("protocol", "contract"):
        for path in _files(top):
            tree = ast.parse(path.read_text())
            # ``from hpcflow import x`` imports hpcflow.x
            named = {f"hpcflow.{a.name}" for node in ast.walk(tree)
                     if isinstance(node, ast.ImportFrom) and node.module == "hpcflow"
                     for a in node.names}
            bad = sorted(m for m in (_imports(path) - {"hpcflow"}) | named
                         if m.startswith("hpcflow")
                         and not m.startswith(("hpcflow.protocol", "hpcflow.contract")))
            if bad:
                offenders[str(path.relative_to(PKG))] = bad
    assert offenders == {}
