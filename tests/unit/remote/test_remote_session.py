"""Remote mode's pure parts: the remote shell line (run here by a real sh), the upload bundle
from a real git repository, and the CLI's argument handling."""

from __future__ import annotations

import io
import json
import os
import socket
import subprocess
import tarfile
import time
from pathlib import Path

import click
import pytest

from hpcflow.cli.jobs import submit
from hpcflow.cli.remote import check_remote_options, positional_index
from hpcflow.errors import SpecError
from hpcflow.remote.bundle import CODE_RECORD, code_snapshot, secret_like_names, spec_only
from hpcflow.remote.session import RemoteOptions, hpcflow_words, remote_line, remote_path, run_remote
from hpcflow.remote.ssh import Host, RemoteError, parse_host

HOSTILE = ["it's", "$(touch /tmp/pwned)", "a b", "x;y", "`id`", "new\nline", "--", "", "*"]


def sh(line: str) -> subprocess.CompletedProcess[str]:
    """Run ``line`` with stdin open until it ends, as an SSH channel's stdin stays open."""
    read_end, write_end = os.pipe()
    try:
        return subprocess.run(["sh", "-c", line], stdin=read_end, capture_output=True, text=True,
                              timeout=30)
    finally:
        os.close(read_end)
        os.close(write_end)


def test_every_word_reaches_the_remote_program_unchanged(tmp_path):
    words = hpcflow_words("MARK='a b' sh -c 'printf \"%s|\" \"$MARK\" \"$0\" \"$@\"'")
    proc = sh(remote_line(words, "logs", HOSTILE, cwd=str(tmp_path)))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split("|")[:-1] == ["a b", "logs", *HOSTILE]
    assert not Path("/tmp/pwned").exists()


def test_the_remote_exit_code_comes_back():
    proc = sh(remote_line(hpcflow_words("sh -c 'exit \"$0\"'"), "7", []))
    assert proc.returncode == 7


def test_the_remote_command_ends_when_the_connection_closes():
    """stdin of the SSH channel reaching end-of-file (the connection went) ends the command."""
    proc = subprocess.Popen(["sh", "-c", remote_line(hpcflow_words("sleep"), "300", [])],
                            stdin=subprocess.PIPE)
    time.sleep(0.5)
    assert proc.poll() is None  # open stdin: it runs
    proc.stdin.close()
    assert proc.wait(timeout=10) == 143  # TERM


def test_a_missing_program_is_exit_127():
    proc = sh(remote_line(hpcflow_words("/nonexistent/hpcflow"), "status", []))
    assert proc.returncode == 127


@pytest.mark.parametrize("value, problem", [
    pytest.param("", "names no program", id="empty"),
    pytest.param("PYTHONPATH=/x", "names no program", id="only-an-assignment"),
    pytest.param("'unclosed", "No closing quotation", id="bad-quotes"),
])
def test_a_bad_remote_hpcflow_is_refused(value, problem):
    with pytest.raises(SpecError, match=problem) as info:
        hpcflow_words(value)
    assert str(info.value).startswith("--remote-hpcflow: ")


def test_a_remote_dir_under_home_expands_there_and_nothing_else_does():
    assert sh(f"HOME=/h; echo {remote_path('~/runs $x')}").stdout == "/h/runs $x\n"
    assert sh(f"echo {remote_path('/a/~/$(id)')}").stdout == "/a/~/$(id)\n"


@pytest.mark.parametrize("text, host", [
    pytest.param("head", Host("head"), id="name"),
    pytest.param("admin@head-1.example.org:2222", Host("head-1.example.org", 2222, "admin"),
                 id="user-port"),
])
def test_parse_host(text, host):
    assert parse_host(text) == host


@pytest.mark.parametrize("text", ["a,b", "n[1-2]", "u@", "h:0", "h:x"])
def test_parse_host_refuses_what_is_not_one_host(text):
    with pytest.raises(SpecError, match="^--host: "):
        parse_host(text)


@pytest.mark.parametrize("args, index", [
    pytest.param(["job.yaml"], 0, id="alone"),
    pytest.param(["--set", "nodes=2", "job.yaml", "--json"], 2, id="after-a-valued-option"),
    pytest.param(["--set=nodes=2", "-f", "job.yaml"], 2, id="joined-value-and-flag"),
    pytest.param(["--dry-run", "--", "-job.yaml"], 2, id="after-double-dash"),
    pytest.param(["--json"], None, id="none"),
])
def test_the_spec_argument_is_found_as_click_parses_it(args, index):
    assert positional_index(submit, args) == index


def test_remote_options_without_host_are_refused():
    with pytest.raises(click.UsageError, match="--code, --identity: allowed only with --host"):
        check_remote_options({"code": True, "identity": "k", "remote_dir": "~/hpcflow-remote"})
    check_remote_options({"host": "h", "code": True})


def git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", *args],
                   check=True, capture_output=True)


def members(data: bytes) -> dict[str, bytes]:
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
        return {m.name: tar.extractfile(m).read() for m in tar if m.isfile()}


def test_a_code_snapshot_is_the_commit_plus_the_spec_on_disk(tmp_path):
    repo = tmp_path / "repo"
    (repo / "conf").mkdir(parents=True)
    (repo / "train.py").write_text("v1\n")
    (repo / "conf/job.yaml").write_text("name: committed\n")
    (repo / ".gitignore").write_text("data/\n")
    git(repo, "init", "-q")
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "c")
    (repo / "train.py").write_text("v2, not committed\n")
    (repo / "conf/job.yaml").write_text("name: edited\n")
    (repo / "new file.py").write_text("untracked\n")
    (repo / "data").mkdir()
    (repo / "data/big.bin").write_text("ignored\n")
    bundle = code_snapshot(repo / "conf" / "job.yaml")
    files = members(bundle.data)
    assert bundle.spec_path == "conf/job.yaml"
    assert files["conf/job.yaml"] == b"name: edited\n"
    assert files["train.py"] == b"v1\n"
    assert "new file.py" not in files and "data/big.bin" not in files
    assert bundle.uncommitted == ["new file.py", "train.py"]
    record = json.loads(files[CODE_RECORD])
    assert record["commit"] == bundle.commit and record["uncommitted_not_sent"] == bundle.uncommitted


def test_code_needs_a_git_repository_with_a_commit(tmp_path):
    spec = tmp_path / "job.yaml"
    spec.write_text("name: x\n")
    with pytest.raises(SpecError, match="is not inside a git repository"):
        code_snapshot(spec)
    git(tmp_path, "init", "-q")
    with pytest.raises(SpecError, match="has no commit yet"):
        code_snapshot(spec)


def test_without_code_only_the_spec_goes(tmp_path):
    spec = tmp_path / "job.yaml"
    spec.write_text("name: x\n")
    (tmp_path / "train.py").write_text("beside it\n")
    bundle = spec_only(spec)
    assert members(bundle.data) == {"job.yaml": b"name: x\n"} and bundle.spec_path == "job.yaml"
    with pytest.raises(SpecError, match="SPEC: cannot read"):
        spec_only(tmp_path / "missing.yaml")


@pytest.mark.parametrize(("path", "secret"), [
    pytest.param(".env", True, id="dotenv"),
    pytest.param("deploy/.env.production", True, id="dotenv-suffix"),
    pytest.param("conf/prod.env", True, id="named-env"),
    pytest.param(".env.example", False, id="dotenv-template"),
    pytest.param("keys/id_ed25519", True, id="ssh-key"),
    pytest.param("keys/id_ed25519.pub", False, id="ssh-public-key"),
    pytest.param(".aws/credentials", True, id="aws-credentials"),
    pytest.param("tls/server.pem", True, id="pem"),
    pytest.param(".netrc", True, id="netrc"),
    pytest.param("environment.py", False, id="python-module"),
    pytest.param("docs/credentials.md", False, id="a-doc-about-credentials"),
    pytest.param("config/secrets.yaml", True, id="secrets-yaml"),
    pytest.param("deploy/api.secret", True, id="dot-secret"),
    pytest.param("gcp/credentials.json", True, id="google-credentials-json"),
    pytest.param("gcp/client_secret_123.apps.json", True, id="google-client-secret"),
    pytest.param("docs/secrets.md", False, id="a-doc-about-secrets"),
])
def test_well_known_secret_file_names(path, secret):
    assert secret_like_names([path]) == ([path] if secret else [])


def test_a_snapshot_with_a_committed_env_file_is_flagged_and_run_remote_warns(tmp_path,
                                                                            monkeypatch):
    monkeypatch.setenv("HPCFLOW_HOME", str(tmp_path / "state"))
    repo = tmp_path / "repo"
    (repo / "keys").mkdir(parents=True)
    (repo / "job.yaml").write_text("name: x\n")
    (repo / ".env").write_text("WANDB_API_KEY=secret\n")
    (repo / "keys/id_rsa").write_text("-----BEGIN OPENSSH PRIVATE KEY-----\n")
    (repo / ".env.example").write_text("WANDB_API_KEY=\n")
    git(repo, "init", "-q")
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "c")
    bundle = code_snapshot(repo / "job.yaml")
    assert bundle.secret_like == [".env", "keys/id_rsa"]
    # Refused before any connection: nothing is sent without --code-with-secret-files.
    notes: list[str] = []
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    opts = RemoteOptions(Host("127.0.0.1", port), code=True,
                         known_hosts=str(tmp_path / "known_hosts"))
    with pytest.raises(SpecError) as info:
        run_remote(opts, "submit", [str(repo / "job.yaml")], spec_index=0, note=notes.append)
    assert ".env, keys/id_rsa;" in str(info.value) and "git rm --cached" in str(info.value)
    assert "--code-with-secret-files" in str(info.value) and notes == []
    # With the flag they go, with a warning that comes before any connection (here: nothing
    # listens, so it then fails).
    opts = RemoteOptions(Host("127.0.0.1", port), code=True, send_secret_files=True,
                         known_hosts=str(tmp_path / "known_hosts"))
    with pytest.raises(RemoteError):
        run_remote(opts, "submit", [str(repo / "job.yaml")], spec_index=0, note=notes.append)
    [warning] = [n for n in notes if "credentials files" in n]
    assert ".env, keys/id_rsa" in warning and "--code-with-secret-files" in warning


def test_code_with_secret_files_needs_host_and_code():
    with pytest.raises(click.UsageError, match="--code-with-secret-files: allowed only with --host"):
        check_remote_options({"code_with_secret_files": True})
