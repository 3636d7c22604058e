"""The job's decisions (docs/architecture.md, "The supervisor").

``rules`` decides (pure functions over the typed inputs of ``model``), ``facts`` reads what the
rules decide on, ``effects`` requeues, and ``python -m hpcflow.supervisor`` answers the batch
script. Nothing is imported here: the batch script starts ``__main__`` directly.
"""
