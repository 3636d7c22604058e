"""The ``hyperpod`` block of a job spec: what a job asks of SageMaker HyperPod's own recovery when
it runs on a HyperPod (Slurm) cluster (docs/hyperpod.md, "First job").

``auto_resume: true`` runs the training step as ``srun --auto-resume=1 ...``: when the step fails
and HyperPod's health checks find a faulty node, HyperPod replaces the node and runs the step
again, and the program resumes from its latest committed checkpoint (AWS, "Automatic node
recovery and auto-resume",
https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-resiliency-slurm-auto-resume.html).
Auto-resume works on a step (an ``srun``), not on the batch script. hpcflow's supervisor then
leaves node faults to HyperPod: it excludes no node and does not restart a step that lost ranks
without an exit record (:func:`hpcflow.supervisor.rules.after_failed_step`).

Plain Slurm refuses the option (``srun: unrecognized option '--auto-resume=1'``, exit 255, seen
with Slurm 22.05): ``hpcflow submit`` refuses such a job on a node that is not a HyperPod node
(:func:`hpcflow.hyperpod.node.hyperpod_node_fact`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic import Field

from hpcflow.spec.job_fields import SpecModel

if TYPE_CHECKING:
    from hpcflow.spec.job import JobSpec

#: The srun option of HyperPod's auto-resume (AWS, "Automatic node recovery and auto-resume").
AUTO_RESUME_OPTION = "--auto-resume=1"

FIELD = "hyperpod.auto_resume"


class HyperPodJobSpec(SpecModel):
    """What the job asks of SageMaker HyperPod (Slurm) when it runs on a HyperPod cluster."""

    auto_resume: bool = Field(
        default=False,
        description=(
            "Run the step as srun --auto-resume=1: on a node fault HyperPod replaces the node "
            "and runs the step again (from the latest committed checkpoint); hpcflow then "
            "excludes no node and leaves such a failure to HyperPod. Needs launcher: srun, "
            "platform: slurm, a HyperPod cluster (plain Slurm refuses the option), "
            "resilience.spare_nodes: 0 and no resilience.warm_standby."
        ),
    )


def hyperpod_problems(spec: JobSpec) -> list[tuple[str, Any, str]]:
    """The cross-field rules of ``hyperpod.auto_resume``, as (field, value, what is allowed)
    rows for :func:`hpcflow.spec.job_fields.raise_problems`; ``[]`` when it is off.

    - ``platform: sagemaker``: the option is HyperPod's srun option; a SageMaker training job
      runs no srun (docs/sagemaker.md).
    - ``launcher: torchrun``: HyperPod reruns the step on a node list with the replaced node in
      it, while torchrun's rendezvous endpoint, the allocation's first node, is fixed in the
      step's command (:func:`hpcflow.supervisor.commands.step_argv`); srun's ranks read the
      rerun step's own node list (``SLURM_STEP_NODELIST``, :mod:`hpcflow.runtime.env`).
    - ``resilience.spare_nodes``: spares replace a node hpcflow excluded; under auto-resume
      HyperPod replaces the node and hpcflow excludes none, so spares would only idle.
    - ``resilience.warm_standby``: the standby step is started with the step's srun options,
      so it would be a second auto-resumed step on the nodes HyperPod replaces.
    """
    if spec.hyperpod is None or not spec.hyperpod.auto_resume:
        return []
    problems: list[tuple[str, Any, str]] = []
    if spec.platform != "slurm":
        problems.append((FIELD, True, f"needs platform: slurm (platform is {spec.platform!r}): "
                         f"{AUTO_RESUME_OPTION} is an srun option of a HyperPod Slurm cluster; "
                         "a SageMaker training job runs no srun"))
    if spec.launcher != "srun":
        problems.append((FIELD, True, f"needs launcher: srun (launcher is {spec.launcher!r}): "
                         "HyperPod reruns the step with a replaced node, and torchrun's "
                         "rendezvous endpoint (the allocation's first node) is fixed in the "
                         "step's command"))
    res = spec.resilience
    if res is not None and res.spare_nodes:
        problems.append(("resilience.spare_nodes", res.spare_nodes,
                         f"must be 0 with {FIELD}: HyperPod replaces a faulty node itself and "
                         "hpcflow excludes none, so a spare node would only idle"))
    if res is not None and res.warm_standby:
        problems.append(("resilience.warm_standby", True,
                         f"must be false with {FIELD}: the standby step takes the step's srun "
                         "options, and would be a second auto-resumed step on the nodes "
                         "HyperPod replaces"))
    return problems
