"""Planning before paying: the checkpoint interval, the goodput and cost expected at scale, and a
parallel layout that fits in GPU memory. Pure functions over numbers (no I/O, no torch); the
CLI (``hpcflow plan``) feeds them measured figures and prices.

Modules, one job each:

- :mod:`~hpcflow.plan.interval`: Young's, Daly's and the availability-optimal interval
- :mod:`~hpcflow.plan.goodput`: the expected goodput in closed form, lost time split by cause
- :mod:`~hpcflow.plan.simulate`: a seeded Monte-Carlo simulation of the same model
- :mod:`~hpcflow.plan.cost`: dollars from a price per node-hour
- :mod:`~hpcflow.plan.layout`: memory per GPU of every (dp, pp, tp), ranked
- :mod:`~hpcflow.plan.models`: model shapes, with the Llama 3 presets
"""
