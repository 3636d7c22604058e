"""Running hpcflow on other machines over SSH (fabric): remote mode (``hpcflow --host``) and
the node bootstrap fan-out, on one connection helper (:mod:`hpcflow.remote.ssh`)."""
