"""How a job or an attempt ended: the kinds ``status`` and ``report`` show (docs/protocol.md,
"Ending kinds").

The ledger's ``job_end``/``requeue`` ``reason`` words and the events of in-job failures, all named
in :mod:`hpcflow.protocol`, map onto these kinds. The one list of kinds: add new ones here. Pure:
no file access.
"""

from __future__ import annotations

from hpcflow import protocol as P

ENDING_COMPLETED = "completed"
ENDING_PREEMPTED = "preempted"
ENDING_PREEMPTED_SPOT = "preempted_spot"
ENDING_PREEMPTED_SLURM = "preempted_slurm"
ENDING_NODE_FAILURE = "node_failure"
ENDING_RANK_RESTARTED = "rank_restarted"
ENDING_HANG = "hang"
ENDING_PROGRAM_ERROR = "program_error"
ENDING_RANK_KILLED = "rank_killed"
ENDING_REQUEUE_LIMIT = "requeue_limit"
ENDING_FAILURE_LIMIT = "failure_limit"
ENDING_NODE_EXCLUDED = "node_excluded"
ENDING_CANCELLED = "cancelled"
ENDING_TIME_LIMIT = "time_limit"
ENDING_HELD = "held"
ENDING_NOT_REQUEUED = "not_requeued"
ENDING_VERSION_SKEW = "version_skew"
ENDING_SUPERVISOR_ERROR = "supervisor_error"
ENDING_NETWORK_FALLBACK = "network_fallback"
ENDING_PROGRAM_REQUEUED = "program_requeued"
#: kind -> what it means, in the words ``status`` and ``report`` print.
ENDING_KINDS: dict[str, str] = {
    ENDING_COMPLETED: "completed: every step trained and the program exited 0, or the final "
                      "checkpoint was committed and every rank was done",
    ENDING_PREEMPTED: "warned preemption, time-limit warning: the warning signal came without a "
                      "spot notice (Slurm's --signal; one sent by hand with scancel --signal "
                      "arrives the same way); checkpoint committed, requeued",
    ENDING_PREEMPTED_SPOT: "warned preemption, spot notice: hpcflow spot-watch recorded a spot "
                           "interruption notice and sent the warning signal; checkpoint "
                           "committed, requeued",
    ENDING_PREEMPTED_SLURM: "preempted by Slurm: a higher-priority job took the nodes (TERM at the "
                            "start of GraceTime); the program checkpointed or stopped, requeued",
    ENDING_NODE_FAILURE: "node failure: the attempt left no end record and Slurm requeued the job",
    ENDING_RANK_RESTARTED: "rank failure: the step was restarted inside the allocation",
    ENDING_HANG: "hang: ranks stopped reporting progress",
    ENDING_PROGRAM_ERROR: "program error: a rank exited with an error",
    ENDING_RANK_KILLED: "rank killed: a rank died of a signal without recording an exit",
    ENDING_REQUEUE_LIMIT: "requeue limit reached: checkpoint committed, but no requeue left",
    ENDING_FAILURE_LIMIT: "failure limit reached: resilience.max_failures failed steps used",
    ENDING_NODE_EXCLUDED: "node excluded: rank failures kept hitting one node and no spare node "
                          "was left; requeued without it",
    ENDING_CANCELLED: "cancelled by the user",
    ENDING_TIME_LIMIT: "time limit: Slurm ended the job at its time limit, before the warning's "
                       "checkpoint and requeue (no warning, or one too late); never requeued",
    ENDING_HELD: "held: Slurm will not start it until `scontrol release <id>`",
    ENDING_NOT_REQUEUED: "preempted but not requeued (no checkpoint committed, requeue disabled "
                         "or refused)",
    ENDING_VERSION_SKEW: "version skew: the job was rendered by another hpcflow version; submit it "
                         "again",
    ENDING_SUPERVISOR_ERROR: "hpcflow's supervisor failed (a bug): the job ended without a decision",
    ENDING_NETWORK_FALLBACK: "network fallback: NCCL chose TCP sockets on an instance with EFA "
                             "(network.require_efa); every rank stopped after the first "
                             "collective",
    ENDING_PROGRAM_REQUEUED: "requeued by the program: it caught the warning signal, saved its "
                             "own checkpoint and requeued the job itself (scontrol requeue from a "
                             "rank, as Lightning does); hpcflow did not requeue it again",
}
#: job_end/requeue ``reason`` words the batch script writes -> ending kind.
REASON_KIND: dict[str, str] = {
    P.REASON_COMPLETED: ENDING_COMPLETED,
    P.REASON_COMPLETED_AFTER_DONE: ENDING_COMPLETED,
    P.REASON_REQUEUE: ENDING_PREEMPTED,
    P.REASON_REQUEUED_NO_CHECKPOINT: ENDING_PREEMPTED,
    P.REASON_FAILED: ENDING_PROGRAM_ERROR,
    P.REASON_PROGRAM_ERROR: ENDING_PROGRAM_ERROR,
    P.REASON_FAILURE_LIMIT: ENDING_FAILURE_LIMIT,
    P.REASON_RANK_KILLED: ENDING_RANK_KILLED,
    P.REASON_REQUEUE_LIMIT: ENDING_REQUEUE_LIMIT,
    P.REASON_NODE_EXCLUDED: ENDING_NODE_EXCLUDED,
    P.REASON_PREEMPTED_NO_CHECKPOINT: ENDING_NOT_REQUEUED,
    P.REASON_REQUEUE_FAILED: ENDING_NOT_REQUEUED,
    P.REASON_REQUEUE_DISABLED: ENDING_NOT_REQUEUED,
    P.REASON_CANCELLED: ENDING_CANCELLED,
    P.REASON_TIME_LIMIT: ENDING_TIME_LIMIT,
    P.REASON_VERSION_SKEW: ENDING_VERSION_SKEW,
    P.REASON_SUPERVISOR_ERROR: ENDING_SUPERVISOR_ERROR,
    P.REASON_NETWORK_FALLBACK: ENDING_NETWORK_FALLBACK,
    P.REASON_PROGRAM_REQUEUED: ENDING_PROGRAM_REQUEUED,
}
#: The warned preemptions: an attempt that ended so and lost no step is no failure.
PREEMPTED_KINDS = (ENDING_PREEMPTED, ENDING_PREEMPTED_SPOT, ENDING_PREEMPTED_SLURM,
                   ENDING_PROGRAM_REQUEUED)
#: Kinds a warning signal leads to -> the kind when a ``spot_notice`` of the attempt sent it
#: (the others keep their kind; their detail names the source).
SPOT_KIND: dict[str, str] = {ENDING_PREEMPTED: ENDING_PREEMPTED_SPOT}
#: The same for a warning that was Slurm's own preemption (a ``signal`` event with ``source``
#: :data:`hpcflow.protocol.SOURCE_SLURM_PREEMPT`).
SLURM_PREEMPT_KIND: dict[str, str] = {ENDING_PREEMPTED: ENDING_PREEMPTED_SLURM}
#: job_end/requeue ``reason`` words that follow a warning signal (the preemption path).
WARNED_REASONS = (P.REASON_REQUEUE, P.REASON_REQUEUED_NO_CHECKPOINT, P.REASON_PROGRAM_REQUEUED,
                  P.REASON_REQUEUE_LIMIT,
                  P.REASON_PREEMPTED_NO_CHECKPOINT, P.REASON_REQUEUE_FAILED, P.REASON_REQUEUE_DISABLED)
#: Ledger events an in-job failure leaves (the step ended, the attempt goes on) -> kind.
FAILURE_EVENT_KIND: dict[str, str] = {
    P.EVENT_HANG: ENDING_HANG,
    P.EVENT_STEP_RESTART: ENDING_RANK_RESTARTED,
}
