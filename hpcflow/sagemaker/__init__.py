"""SageMaker training jobs: the job spec rendered as a ``CreateTrainingJob`` request
(:mod:`~hpcflow.sagemaker.request`), submitted and recorded (:mod:`~hpcflow.sagemaker.service`),
and started inside the container as SageMaker's training toolkit would
(:mod:`~hpcflow.sagemaker.launch`). docs/sagemaker.md."""
