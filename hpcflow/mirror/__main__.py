"""``python -m hpcflow.mirror watch|pull``: the two commands the job's supervisor runs.

``pull``: when the checkpoint folder holds no committed checkpoint, download the newest complete
mirror from S3 into it (bit-exact). Exit 0 when it pulled one or had nothing to do, 1 when S3
or the file system failed (the batch script warns and starts the program anyway), 2 for bad
arguments.

``list``: the units under an S3 prefix, complete (with a record) or not. Exit 1 when S3 failed.

``watch``: mirror each newly committed checkpoint until the stop file appears or TERM, then drain (see
:mod:`hpcflow.mirror.watch`). Exit 0; 3 when the drain deadline abandoned an upload.

Credentials come only from boto3's standard chain; nothing here reads or prints a key.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

from hpcflow.spec.s3uri import parse_s3_uri


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m hpcflow.mirror",
                                     description="Mirror committed checkpoints to S3 and back.")
    sub = parser.add_subparsers(dest="command", required=True)
    listing = sub.add_parser("list", help="the mirrors under an S3 prefix, complete or not",
                             description="the mirrors under an S3 prefix, complete or not")
    listing.add_argument("--s3-uri", required=True, help="s3://bucket/prefix")
    for name, text in (("watch", "mirror newly committed checkpoints until TERM"),
                       ("pull", "pull the newest complete mirror into an empty checkpoint folder")):
        p = sub.add_parser(name, help=text, description=text)
        p.add_argument("--checkpoint-dir", type=Path, required=True, help="the checkpoint folder")
        p.add_argument("--s3-uri", required=True, help="s3://bucket/prefix")
        p.add_argument("--ledger", type=Path, help="the job's events.jsonl (no events without)")
        p.add_argument("--job-id", default="", help="job id written into ledger events")
        p.add_argument("--restart", type=int, default=0, help="SLURM_RESTART_COUNT of the attempt")
        p.add_argument("--concurrency", type=int, default=4, help="parts/files in flight [4]")
        p.add_argument("--part-mib", type=int, default=8, help="multipart part size, MiB [8]")
        p.add_argument("--max-mib-s", type=float, default=0.0,
                       help="bandwidth cap in MiB/s, so training keeps its I/O [0: none]")
        if name == "watch":
            p.add_argument("--keep", type=int, required=True,
                           help="complete mirrors kept on S3 (checkpoint.keep)")
            p.add_argument("--poll-s", type=float, default=2.0, help="seconds between scans [2]")
            p.add_argument("--stop-file", type=Path,
                           help="drain and exit once this file exists (the batch script's way)")
            p.add_argument("--drain-s", type=float, default=60.0,
                           help="seconds a drain may take after TERM before it is abandoned [60]")
            p.add_argument("--parent-pid", type=int, default=None,
                           help="stop, without a drain, once the process that started it (this "
                                "pid: the job's supervisor) is gone [the parent at start]")
            p.add_argument("--nice", type=int, default=19,
                           help="priority increment, so training keeps the CPU [19]")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        uri = parse_s3_uri(args.s3_uri)
    except ValueError as exc:
        print(f"--s3-uri: {args.s3_uri!r}: {exc}", file=sys.stderr)
        return 2
    try:
        import boto3  # noqa: F401 - the mirror's one heavy dependency
    except ImportError:
        print("checkpoint.s3_uri needs boto3 beside hpcflow: pip install 'hpcflow[aws]'",
              file=sys.stderr)
        return 1
    if args.command == "list":
        return _list(uri)
    bad = [f"{flag}: {value} (allowed: {rule})" for flag, value, ok, rule in (
        ("--concurrency", args.concurrency, 1 <= args.concurrency <= 64, "1 to 64"),
        ("--part-mib", args.part_mib, 5 <= args.part_mib <= 5120, "5 to 5120, S3's part sizes"),
        ("--max-mib-s", args.max_mib_s, args.max_mib_s >= 0, "0 (no cap) or more"),
        ("--keep", getattr(args, "keep", 1), getattr(args, "keep", 1) >= 1, "at least 1"),
        ("--poll-s", getattr(args, "poll_s", 1), getattr(args, "poll_s", 1) > 0, "above 0"),
        ("--drain-s", getattr(args, "drain_s", 0), getattr(args, "drain_s", 0) >= 0, "0 or more"),
    ) if not ok]
    if bad:
        print("\n".join(bad), file=sys.stderr)
        return 2
    from hpcflow.mirror import store, watch

    settings = store.TransferSettings(part_bytes=args.part_mib * store.MiB,
                                      threshold_bytes=args.part_mib * store.MiB,
                                      concurrency=args.concurrency,
                                      max_bandwidth_bps=int(args.max_mib_s * store.MiB) or None)
    ledger = watch.Ledger(args.ledger, args.job_id, args.restart)
    client = store.make_client(args.concurrency)
    if args.command == "pull":
        return _pull(client, uri, args.checkpoint_dir, settings, ledger)
    if args.nice:
        os.nice(args.nice)
    mirror = watch.Mirror(args.checkpoint_dir, uri, args.keep, client, ledger, settings)
    watch.log(f"watching {args.checkpoint_dir} -> {uri} (keep {args.keep})")
    return watch.run(mirror, poll_s=args.poll_s, drain_s=args.drain_s, stop_file=args.stop_file,
                     parent_pid=args.parent_pid)


def _list(uri) -> int:  # noqa: ANN001
    """Print one line per unit: name, step, state, bytes, when mirrored (UTC)."""
    from hpcflow.mirror import local, store, watch

    try:
        complete, incomplete = store.list_mirrors(store.make_client(), uri)
    except store.errors() as exc:
        print(f"cannot list {uri}: {watch.describe(exc)}", file=sys.stderr)
        return 1
    rows = [(m.step, m.name, "complete", str(m.total_bytes),
             time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(m.record.get("mirrored_at", 0))))
            for m in complete]
    rows += [(local.unit_name_step(name)[1], name, "incomplete", "-", "-")  # type: ignore[index]
             for name in incomplete]
    print("unit\tstate\tbytes\tmirrored_at")
    for row in sorted(rows):
        print("\t".join(row[1:]))
    return 0


def _pull(client, uri, root: Path, settings, ledger) -> int:  # noqa: ANN001
    from hpcflow.mirror import local, store, watch

    if local.has_complete(root):
        watch.log(f"{root} holds a committed checkpoint: nothing pulled from {uri}")
        return 0
    try:
        complete, _ = store.list_mirrors(client, uri)
        if not complete:
            watch.log(f"no complete checkpoint under {uri}: the program starts without one")
            return 0
        newest = complete[-1]
        started = time.monotonic()
        root.mkdir(parents=True, exist_ok=True)
        path = store.pull(client, uri, newest, root, settings)
    except (OSError, *store.errors()) as exc:
        watch.log(f"WARNING: pulling the newest checkpoint from {uri} failed "
                  f"({watch.describe(exc)}); the program starts without it")
        ledger.event("mirror_pull_failed", error=watch.describe(exc)[:300])
        return 1
    seconds = time.monotonic() - started
    ledger.event("mirror_pull", unit=newest.name, step=newest.step, bytes=newest.total_bytes,
                 seconds=round(seconds, 3))
    watch.log(f"pulled {newest.name} ({newest.total_bytes} bytes, {seconds:.1f} s) from {uri} "
              f"into {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
