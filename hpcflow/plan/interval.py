"""The checkpoint interval that loses the least time to failures. Pure; imports only ``math``
(the runtime may use it).

Model (the one all three formulas share): failures arrive as a Poisson process with mean time
between failures ``mtbf_s`` (exponential gaps); training runs ``interval_s`` seconds, then a
save blocks it ``save_s`` seconds; a failure loses the work since the last committed save.

Sources:
    Young, J. W. (1974). A first order approximation to the optimum checkpoint interval.
        Communications of the ACM 17(9), 530-531: ``sqrt(2 * save_s * mtbf_s)``.
    Daly, J. T. (2006). A higher order estimate of the optimum checkpoint interval for restart
        dumps. Future Generation Computer Systems 22(3), 303-312: the series below, and
        ``mtbf_s`` itself once the save cost reaches twice the MTBF.
    Saxena, N. R., Hukerikar, S., Blaz, M., Raj, S. (2024). Optimal checkpoint interval with
        availability as an objective function. arXiv:2410.18124: choose the interval that
        maximises availability (useful time over elapsed time) rather than one that minimises
        lost time; the two agree asymptotically when the save and recovery costs are small
        against the MTBF.

:func:`availability_optimal_interval` maximises the exact availability of the model, with the
recovery and detection times counted (:func:`availability`), by solving its stationarity
condition numerically; it is not a transcription of a closed form from the paper. Under
exponential failures the recovery and detection times scale the availability by a constant
factor and so do not move its maximum (Daly's estimate has no restart term either).

When none of this applies: a save cost close to the MTBF (the interval then tends to the MTBF and
the availability to zero: more failures than saves), and a job shorter than a few intervals or a
few MTBFs (the expectations are long-run averages).
"""

from __future__ import annotations

import math


def _check(save_s: float, mtbf_s: float) -> None:
    if not (math.isfinite(save_s) and save_s >= 0):
        raise ValueError(f"save_s={save_s!r} must be a finite number of seconds >= 0")
    if not (mtbf_s > 0):  # noqa: SIM201 - also refuses NaN
        raise ValueError(f"mtbf_s={mtbf_s!r} must be a number of seconds above 0 (inf: no "
                         "failures)")


def young_interval(save_s: float, mtbf_s: float) -> float:
    """Young's first-order optimum (1974): ``sqrt(2 * save_s * mtbf_s)`` seconds of training
    between saves.

    Raises:
        ValueError: ``save_s`` negative or not finite, ``mtbf_s`` not above 0.
    """
    _check(save_s, mtbf_s)
    return math.sqrt(2.0 * save_s * mtbf_s)


def daly_interval(save_s: float, mtbf_s: float) -> float:
    """Daly's higher-order optimum (2006), in seconds of training between saves::

        sqrt(2 d M) * (1 + sqrt(d / 2M) / 3 + (d / 2M) / 9) - d    if d < 2M
        M                                                            otherwise

    with ``d = save_s`` and ``M = mtbf_s``.

    Raises:
        ValueError: as :func:`young_interval`.
    """
    _check(save_s, mtbf_s)
    if math.isinf(mtbf_s):
        return math.inf
    if save_s >= 2.0 * mtbf_s:
        return mtbf_s
    ratio = save_s / (2.0 * mtbf_s)
    return math.sqrt(2.0 * save_s * mtbf_s) * (1 + math.sqrt(ratio) / 3 + ratio / 9) - save_s


def availability(interval_s: float, save_s: float, mtbf_s: float, *, recovery_s: float = 0.0,
                 detection_s: float = 0.0) -> float:
    """Long-run fraction of elapsed time spent on committed training (0..1).

    One segment is ``interval_s`` of training then ``save_s`` of saving (``L`` in all). A
    failure inside it costs the time already spent, ``detection_s`` until it is noticed, and
    ``recovery_s`` to train again (failures during recovery are not modelled). The expected
    time to complete a segment is ``(M + detection_s + recovery_s) * (exp(L/M) - 1)``
    (renewal argument: ``exp(L/M) - 1`` failures are expected before the first segment that
    survives, each costing ``E[X | X < L]`` plus detection and recovery); without failures it is
    ``L``.

    Raises:
        ValueError: a negative or non-finite cost, ``mtbf_s`` not above 0.
    """
    _check(save_s, mtbf_s)
    for name, value in (("interval_s", interval_s), ("recovery_s", recovery_s),
                        ("detection_s", detection_s)):
        if not (math.isfinite(value) and value >= 0):
            raise ValueError(f"{name}={value!r} must be a finite number of seconds >= 0")
    return interval_s / segment_time(interval_s + save_s, mtbf_s, recovery_s + detection_s)


def segment_time(length_s: float, mtbf_s: float, downtime_s: float) -> float:
    """Expected elapsed seconds to complete ``length_s`` of failure-free work when failures
    (mean gap ``mtbf_s``) each cost the time spent plus ``downtime_s``:
    ``(M + downtime_s) * expm1(length_s / M)``, or ``length_s`` when ``M`` is infinite."""
    if math.isinf(mtbf_s):
        return length_s
    return (mtbf_s + downtime_s) * math.expm1(length_s / mtbf_s)


def availability_optimal_interval(save_s: float, mtbf_s: float) -> float:
    """The training seconds between saves that maximise :func:`availability`.

    Stationarity of ``t / (exp((t + d)/M) - 1)`` gives ``(1 - u) * exp(u + d/M) = 1`` with
    ``u = t/M``; the left side falls strictly from ``exp(d/M) > 1`` at ``u = 0`` to 0 at
    ``u = 1``, so bisection finds the one root to machine precision (about 60 halvings). The
    result is ``M * (1 + W0(-exp(-1 - d/M)))`` (Lambert W), whose series
    ``sqrt(2 d M) - 2d/3 + ...`` agrees with Daly's to second order. The recovery and
    detection times do not enter (see the module docstring).

    Returns:
        Seconds (``inf`` when ``mtbf_s`` is infinite, 0 when ``save_s`` is 0).

    Raises:
        ValueError: as :func:`young_interval`.
    """
    _check(save_s, mtbf_s)
    if math.isinf(mtbf_s):
        return math.inf
    if save_s == 0:
        return 0.0
    d = save_s / mtbf_s
    lo, hi = 0.0, 1.0
    for _ in range(200):
        mid = (lo + hi) / 2
        if math.log1p(-mid) + mid + d > 0:  # (1 - u) exp(u + d) > 1, without overflow
            lo = mid
        else:
            hi = mid
        if hi - lo < 1e-15:
            break
    return mtbf_s * (lo + hi) / 2
