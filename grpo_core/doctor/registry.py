"""The run doctor's checks, registered where they are written (as reward rules are: :mod:`grpo_core.rewards.registry`).

A check is a function ``(series, groups, config) -> list[Finding]`` (with ``nan_steps`` as a fourth argument when it
asks for it) decorated with :func:`doctor_check` in its subject's module (:mod:`~grpo_core.doctor.health`,
:mod:`~grpo_core.doctor.learning`, :mod:`~grpo_core.doctor.policy`, :mod:`~grpo_core.doctor.drift`); importing
:mod:`grpo_core.doctor` imports those modules, and :func:`~grpo_core.doctor.diagnose` runs every registered check in
``order``. The order decides which check's finding a code keeps when two report the same code, and the order of the
findings within one severity; there is no list to edit.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from grpo_core.doctor.findings import Finding

CheckFunction = Callable[..., list[Finding]]


@dataclass(frozen=True)
class DoctorCheck:
    """One registered check.

    Attributes:
        name: the function's name (``_kl``), unique.
        order: where it runs among the checks (lower first), unique.
        func: the check, ``func(series, groups, config)`` or, with :attr:`wants_nan_steps`,
            ``func(series, groups, config, nan_steps)``.
        wants_nan_steps: it reads ``diagnose``'s ``nan_steps`` too.
    """

    name: str
    order: int
    func: CheckFunction
    wants_nan_steps: bool = False


_CHECKS: dict[str, DoctorCheck] = {}


def doctor_check(order: int, *, nan_steps: bool = False) -> Callable[[CheckFunction], CheckFunction]:
    """Register the decorated function as a check run at ``order``; the function is returned unchanged.

    Raises:
        ValueError: another check already has this name or this order (orders are unique, so the order findings
            come out in never depends on import order).
    """

    def register(func: CheckFunction) -> CheckFunction:
        name = func.__name__
        known = _CHECKS.get(name)
        if known is not None and known.func is not func:
            raise ValueError(f"a doctor check named {name!r} is already registered")
        taken = next((c.name for c in _CHECKS.values() if c.order == order and c.name != name), None)
        if taken is not None:
            raise ValueError(f"doctor check {name!r}: order {order} is already {taken!r}'s")
        _CHECKS[name] = DoctorCheck(name=name, order=order, func=func, wants_nan_steps=nan_steps)
        return func

    return register


def all_checks() -> tuple[DoctorCheck, ...]:
    """The registered checks, in their ``order``."""
    return tuple(sorted(_CHECKS.values(), key=lambda c: c.order))
