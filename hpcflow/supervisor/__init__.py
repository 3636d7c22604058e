"""The job's decisions (docs/architecture.md, "The supervisor").

``rules`` and ``warning`` decide (pure functions over the typed inputs of ``model``), ``facts``
reads what they decide on, ``turns`` takes each turn of an attempt, ``effects`` signals and
requeues, ``commands`` builds the commands of the processes, ``standby`` keeps the warm
standby step beside the step, and ``attempt`` runs the steps; ``python -m hpcflow.supervisor
run`` is the process the batch script starts once per attempt. Nothing is imported here: the
batch script starts ``__main__`` directly.
"""
