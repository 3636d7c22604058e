"""Every fenced block of README.md, docs/*.md (any page, new ones included) and bench/README.md
is run by a test, or is marked in the page as a sample (a picture, or output to compare with)
and not a command.

A block is covered in one of two ways:

- the registry below, :data:`RUN_BY`, maps ``(page, the block's first non-blank line)`` to the
  tests that run or check it (``tests/...py::test_name``); or
- an HTML comment on the line just above the opening fence, which the rendered page hides:
  ``<!-- run by tests/unit/x.py::test_y -->`` (several tests: separated by ``, ``), or
  ``<!-- sample: picture -->`` / ``<!-- sample: output ... -->`` for a block that is not to be
  run. A sample must be plain text (no language, or ``text``): a command or code block is run.

This test checks that the named test exists (a function of that name in that file) and that its
module names the page (so the test reads the page, not a copy); and that no registry entry is
left without its block. It does not run the named tests: the suite does.
"""

from __future__ import annotations

import ast
import functools
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
MARKER = re.compile(r"^<!-- (?:run by (?P<tests>.+?)|sample: (?P<sample>picture|output of .+?)) -->$")
SAMPLE_LANGS = ("", "text")

U, IT = "tests/unit", "tests/integration"
RUN_BY: dict[tuple[str, str], tuple[str, ...]] = {
    # README.md
    ("README.md", "with Run.from_env() as run:"): (
        f"{U}/cli/test_readme_blocks.py::test_the_run_snippet_runs_as_written_outside_slurm",
        f"{IT}/slurm/test_readme_everyday.py::test_the_everyday_block_runs_as_written"),
    ("README.md", "bash scripts/quickstart.sh"): (
        f"{U}/test_readme_scripts.py::"
        "test_the_quickstart_block_runs_install_cluster_rehearsal_and_status",),
    ("README.md", "bash scripts/install.sh --torch cpu     # the CPU build, from PyTorch's CPU "
                  "wheel index"): (
        f"{U}/test_install_script.py::test_the_readme_install_block_is_the_choices_tested_here",),
    ("README.md", "bash tests/run.sh"): (
        f"{U}/test_readme_scripts.py::"
        "test_the_tests_block_runs_the_four_pytest_phases_then_the_benchmarks",),
    ("README.md", 'OMP_NUM_THREADS=1 .venv/bin/python -m pytest -p no:cacheprovider -n 4 --dist '
                  'loadfile -m "not slurm and not dist"'): (
        f"{U}/cli/test_readme_blocks.py::test_the_fast_suite_command_selects_no_cluster_test",
        f"{U}/test_readme_scripts.py::"
        "test_the_tests_block_runs_the_four_pytest_phases_then_the_benchmarks"),
    ("README.md", "hpcflow submit job.yaml                 # render + sbatch; keeps spec, script, "
                  "job id in run_dir"): (
        f"{U}/cli/test_readme_blocks.py::test_each_everyday_command_and_flag_exists",
        f"{IT}/slurm/test_readme_everyday.py::test_the_everyday_block_runs_as_written"),
    # docs/admin-guide.md
    ("docs/admin-guide.md", "# in a checkout of hpcflow"): (
        f"{U}/pcluster/test_admin_guide_commands.py::test_the_install_block_installs_the_aws_extra",
        f"{U}/pcluster/test_admin_guide_commands.py::"
        "test_every_hpcflow_command_in_the_admin_guide_runs"),
    **{("docs/admin-guide.md", first): (
        f"{U}/pcluster/test_admin_guide_commands.py::"
        "test_every_hpcflow_command_in_the_admin_guide_runs",)
       for first in ("hpcflow cluster instances --family p5",
                     "hpcflow cluster render cluster.spec.yaml -o cluster.yaml",
                     "hpcflow cluster validate cluster.yaml",
                     "hpcflow cluster cost cluster.spec.yaml --hours 72",
                     "hpcflow cluster validate existing.yaml")},
    ("docs/admin-guide.md", "name: train-p5"): (
        f"{U}/pcluster/test_examples.py::"
        "test_admin_guide_spec_renders_to_a_valid_p5_config_with_efa_and_fsx",
        f"{U}/pcluster/test_admin_guide_commands.py::"
        "test_every_hpcflow_command_in_the_admin_guide_runs"),
    ("docs/admin-guide.md", "pcluster create-cluster --cluster-name train-p5 "
                            "--cluster-configuration cluster.yaml"): (
        f"{U}/pcluster/test_admin_guide_commands.py::"
        "test_the_create_cluster_line_is_a_pcluster_command",),
    ("docs/admin-guide.md", "Region: us-east-1"): (
        f"{U}/pcluster/test_admin_guide_commands.py::test_the_guide_example_imports_into_fields",
        f"{U}/pcluster/test_admin_guide_commands.py::"
        "test_every_hpcflow_command_in_the_admin_guide_runs"),
    ("docs/admin-guide.md", "hpcflow cluster upload-bootstrap --bucket example-cluster-scripts "
                            "--prefix hpcflow"): (
        f"{IT}/bootstrap/test_admin_guide_bootstrap.py::test_upload_block",),
    ("docs/admin-guide.md", "HOSTS=compute-st-p5-1,compute-st-p5-2   # [user@]host[:port]; Slurm "
                            "hostlists work: compute-st-p5-[1-2]"): (
        f"{IT}/bootstrap/test_admin_guide_bootstrap.py::test_bootstrap_block",),
    ("docs/admin-guide.md", "hpcflow doctor --instance-type p5.48xlarge --shared-dir /fsx"): (
        f"{IT}/bootstrap/test_admin_guide_bootstrap.py::test_doctor_block",),
    # docs/checkpoints.md
    ("docs/checkpoints.md", "checkpoint:"): (
        f"{IT}/mirror/test_docs_checkpoints.py::test_the_spec_block_is_a_valid_checkpoint_block",),
    ("docs/checkpoints.md", "python -m hpcflow.mirror list --s3-uri s3://my-bucket/runs/llm-7b"): (
        f"{IT}/mirror/test_docs_checkpoints.py::test_the_commands_of_the_doc_run",),
    # docs/plan.md
    **{("docs/plan.md", first): (
        f"{U}/plan/test_plan_doc.py::test_every_command_on_the_plan_page_runs",)
       for first in ("hpcflow report 4242 --json",
                     "hpcflow plan goodput --nodes 128 --instance p5.48xlarge --hours 720 "
                     "--save-s 20 --restart-s 420 --startup-s 300 --price-source table --svg "
                     "goodput.svg",
                     "hpcflow plan goodput --nodes 2048 --instance p5.48xlarge --hours 1296 "
                     "--save-s 20 --restart-s 420 --startup-s 300 --price-source table --runs 20",
                     "hpcflow plan layout --model llama-70b --instance p5.48xlarge --nodes 16")},
    ("docs/plan.md", "checkpoint:"): (
        f"{U}/plan/test_plan_doc.py::test_the_pages_spec_fragment_is_a_valid_checkpoint_block",),
    ("docs/plan.md", "nodes: 1"): (
        f"{U}/jobs/test_layout_fit.py::test_the_spec_of_the_plan_page_is_refused_as_it_says",),
    # docs/protocol.md
    ("docs/protocol.md", "<run_dir>/                  mode 0700"): (
        f"{U}/test_protocol_doc.py::test_every_file_name_of_the_protocol_is_in_the_run_directory_block",
        f"{U}/test_protocol_doc.py::test_the_run_directory_block_names_the_fixed_files"),
    ("docs/protocol.md", 'hpcflow-start {"backend", "job_id", "launcher", "restart_count", '
                         '"world_size"}'): (
        f"{U}/test_protocol_doc.py::test_the_tagged_lines_are_what_the_example_program_prints",),
    ("docs/protocol.md", "resilience:"): (
        f"{U}/spec/test_resilience_block.py::"
        "test_the_example_block_in_the_protocol_doc_is_a_valid_spec",),
    # docs/python.md
    **{("docs/python.md", first): (
        f"{IT}/launch/test_docs_python.py::test_quickstart_runs_word_for_word",)
       for first in ("# train_fn.py", "# submit.py", "hpcflow local-cluster up")},
    # docs/remote.md
    ("docs/remote.md", 'hpcflow --host "$HEAD" --accept-new-host-keys list'): (
        f"{IT}/remote/test_docs_remote.py::test_the_commands_of_the_doc_run",),
    # docs/spot.md
    ("docs/spot.md", "bash bootstrap/hpcflow-bootstrap.sh --steps spot-watch --env "
                     "HPCFLOW_SPOT_INTERVAL_S=5"): (
        f"{IT}/bootstrap/test_docs_spot.py::"
        "test_the_bootstrap_block_installs_and_enables_the_service",),
    ("docs/spot.md", "hpcflow spot-watch --once"): (
        f"{IT}/bootstrap/test_docs_spot.py::test_the_check_block_and_its_exit_codes",),
    ("docs/spot.md", "attempt 1: spot notice (terminate, n1) -> committed step 5 in 1 s, 119 s "
                     "before the deadline"): (
        f"{IT}/bootstrap/test_docs_spot.py::"
        "test_the_report_line_in_the_doc_is_what_the_report_prints",),
    # docs/training.md
    ("docs/training.md", "hpcflow local-cluster up"): (
        f"{U}/examples/test_docs_training.py::test_the_block_is_the_documented_commands",
        f"{IT}/slurm/test_3d_resume.py::test_3d_job_preempted_matches_the_uninterrupted_run"),
    # docs/your-training-loop.md
    ("docs/your-training-loop.md", "from hpcflow.runtime import Run  # hpcflow"): (
        f"{IT}/slurm/test_docs_your_loop.py::"
        "test_every_hpcflow_line_of_the_excerpts_is_in_an_example",),
    ("docs/your-training-loop.md", "name: my-loop"): (
        f"{IT}/slurm/test_docs_your_loop.py::test_the_spec_in_the_doc_is_the_example_spec",),
    **{("docs/your-training-loop.md", first): (
        f"{IT}/slurm/test_docs_your_loop.py::test_the_commands_of_the_doc_run",)
       for first in ("hpcflow local-cluster up",
                     "hpcflow submit examples/hf-trainer.yaml --dry-run")},
    # bench/README.md: each command exists with its flags (the runs take minutes each).
    **{("bench/README.md", first): (
        f"{U}/test_bench_readme.py::test_each_command_of_the_page_exists_with_its_flags",)
       for first in (
           ".venv/bin/python bench/bench_checkpoint.py            # 1 GiB state, 3 repeats "
           "(about 2 min here)",
           "hpcflow local-cluster up                               # once; the tests' cluster "
           "does too",
           ".venv/bin/python bench/bench_goodput.py --kill-every-s 15 --kills 3",
           ".venv/bin/python bench/bench_interval.py            # 1500 steps per arm, a failure "
           "every 60 s on average",
           ".venv/bin/python bench/bench_mirror.py            # 256 MiB checkpoint, 3 rounds "
           "(under 1 min here)",
           "hpcflow local-cluster up")},
}


@dataclass(frozen=True)
class Block:
    """One fenced block: its page (relative to the repository), the line of its opening fence
    (1-based), its language, its first non-blank line and the comment above the fence."""

    page: str
    line: int
    lang: str
    first: str
    marker: str

    def __str__(self) -> str:
        return f"{self.page}:{self.line} ({self.lang or 'no language'}) {self.first[:60]!r}"


def pages() -> list[Path]:
    """README.md, every docs/*.md, bench/README.md."""
    return [REPO / "README.md", *sorted((REPO / "docs").glob("*.md")), REPO / "bench" / "README.md"]


def blocks_of(path: Path) -> list[Block]:
    """The fenced blocks of one page (``` or ~~~ fences, indented or not)."""
    lines = path.read_text(encoding="utf-8").splitlines()
    out: list[Block] = []
    i = 0
    while i < len(lines):
        m = re.match(r"^\s*(`{3,}|~{3,})\s*([\w+-]*)", lines[i])
        if not m:
            i += 1
            continue
        fence = m.group(1)
        end = next((j for j in range(i + 1, len(lines))
                    if lines[j].strip().startswith(fence[0] * len(fence))), len(lines))
        first = next((ln.rstrip() for ln in lines[i + 1:end] if ln.strip()), "")
        above = lines[i - 1].strip() if i else ""
        out.append(Block(str(path.relative_to(REPO)), i + 1, m.group(2), first, above))
        i = end + 1
    return out


ALL = [b for p in pages() for b in blocks_of(p)]


def _tests_of(block: Block) -> tuple[str, ...]:
    m = MARKER.match(block.marker)
    if m and m.group("tests"):
        return tuple(t.strip() for t in m.group("tests").split(", "))
    return RUN_BY.get((block.page, block.first), ())


def _sample(block: Block) -> str | None:
    m = MARKER.match(block.marker)
    return m.group("sample") if m else None


def test_the_pages_have_the_blocks_this_test_knows():
    assert len(ALL) >= 54
    assert {b.page for b in ALL} >= {"README.md", "docs/protocol.md", "bench/README.md"}


@pytest.mark.parametrize("block", ALL, ids=str)
def test_every_block_is_run_by_a_test_or_marked_as_a_sample(block: Block):
    assert _tests_of(block) or _sample(block), (
        f"{block}: no test runs this block. Add a test that runs it and name it in "
        "tests/unit/test_docs_blocks.py's RUN_BY, or put `<!-- run by tests/...py::test_name -->` "
        "on the line above the fence; a picture or output sample gets `<!-- sample: picture -->` "
        "or `<!-- sample: output of ... -->` there instead")


@pytest.mark.parametrize("block", [b for b in ALL if _sample(b)], ids=str)
def test_a_sample_is_plain_text_not_a_command(block: Block):
    assert block.lang in SAMPLE_LANGS, (
        f"{block}: marked as a sample but written as {block.lang!r}: a {block.lang} block is "
        "code or a command, and a test must run it")
    assert not _tests_of(block) or _sample(block)


@functools.cache
def _functions(test_file: str) -> frozenset[str]:
    tree = ast.parse((REPO / test_file).read_text(encoding="utf-8"))
    return frozenset(n.name for n in tree.body if isinstance(n, ast.FunctionDef))


def _page_words(page: str) -> tuple[str, ...]:
    """What a test module that reads ``page`` names: the page's file name, or for README.md the
    README (the root one, or bench/'s with "bench")."""
    if page == "bench/README.md":
        return ("bench", "README")
    if page == "README.md":
        return ("README",)
    return (Path(page).stem,)


@pytest.mark.parametrize("block", [b for b in ALL if _tests_of(b)], ids=str)
def test_each_named_test_exists_and_reads_its_page(block: Block):
    for test_id in _tests_of(block):
        file, _, name = test_id.partition("::")
        assert (REPO / file).is_file(), f"{block}: {file} does not exist"
        assert name in _functions(file), f"{block}: {file} has no test {name}"
        text = (REPO / file).read_text(encoding="utf-8")
        helpers = "".join((REPO / "tests" / f"{m}.py").read_text(encoding="utf-8")
                          for m in re.findall(r"^from (readme_text) import", text, re.M))
        for word in _page_words(block.page):
            assert word in text + helpers, f"{block}: {file} never names {word!r}"


def test_no_registry_entry_is_left_without_its_block():
    present = {(b.page, b.first) for b in ALL}
    assert [key for key in RUN_BY if key not in present] == []
