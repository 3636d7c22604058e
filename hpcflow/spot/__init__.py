"""Spot interruption handling on a node: a watcher that turns an EC2 interruption notice into
hpcflow's own preemption path (docs/spot.md)."""
