"""Two-phase checkpoints: the shared file system first, then S3 (docs/checkpoints.md).

Phase one is the runtime's own commit on the shared folder (Lustre, NFS): complete or ignored
(:mod:`hpcflow.runtime.commit`, the HF and Lightning adapters' markers). Phase two lives here, in
a process of its own that the job's supervisor starts when the job spec sets ``checkpoint.s3_uri``:

- before the program starts, ``python -m hpcflow.mirror pull`` fills an empty checkpoint folder
  with the newest complete S3 mirror (a new cluster, a lost file system), bit-exact;
- beside the program, ``python -m hpcflow.mirror watch`` uploads each newly committed checkpoint
  with boto3's managed transfer, confirms every object's size and SHA-256 checksum, and only then
  writes the S3 commit record; readers trust only units with that record. It keeps the last k on
  S3, like ``checkpoint.keep`` on disk, and drains (or abandons, leaving no record) at job end.

Why a separate process rather than a thread in rank 0: training never waits on S3 or the GIL,
any program that writes hpcflow's layouts is covered (the runtime, HF Trainer, Lightning), and
the runtime stays free of boto3. Modules: :mod:`.local` (what is committed on disk, hashes),
:mod:`.store` (the S3 side), :mod:`.watch` (the process loop, ledger events), ``__main__``.
"""
