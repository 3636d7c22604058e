"""SageMaker training jobs: the job spec rendered as a ``CreateTrainingJob`` request
(:mod:`~hpcflow.sagemaker.request`), submitted and recorded (:mod:`~hpcflow.sagemaker.service`),
started inside the container as SageMaker's training toolkit would
(:mod:`~hpcflow.sagemaker.launch`), and read back: ``DescribeTrainingJob`` as a typed record
(:mod:`~hpcflow.sagemaker.record`, :mod:`~hpcflow.sagemaker.status`), the CloudWatch Logs
(:mod:`~hpcflow.sagemaker.logs`) and the goodput report (:mod:`~hpcflow.sagemaker.report`,
:mod:`~hpcflow.sagemaker.report_load`). docs/sagemaker.md."""
