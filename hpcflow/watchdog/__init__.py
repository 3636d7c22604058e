"""Hang detection beside a training step: the ranks' heartbeats, per-section timeouts, stacks
and the step's end (docs/protocol.md, "Hangs and in-job restarts"). Run as
``python -m hpcflow.watchdog`` by the batch script; no torch."""
