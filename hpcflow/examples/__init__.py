"""hpcflow's example workloads: users of the public runtime API (:mod:`hpcflow.runtime`) like
any other program, never the place where the protocol lives.

- :mod:`~hpcflow.examples.train`: the example program, ``python -m hpcflow.examples.train``
- :mod:`~hpcflow.examples.tasks`: the workloads (toy MLP, transformer) behind one interface
- :mod:`~hpcflow.examples.toy`, :mod:`~hpcflow.examples.lm`, :mod:`~hpcflow.examples.data`: the
  models and the text they train on
- :mod:`~hpcflow.examples.parallelize`: TP, FSDP2/DDP and pipeline stages applied to the model
- :mod:`~hpcflow.examples.trainstate`: model, optimizer, sampler and per-layout RNG as one state
- :mod:`~hpcflow.examples.metrics`: step metrics and MFU
"""
