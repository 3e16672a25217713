"""Which model call a request is, and whether a fault answers it: the counting both record
and replay share.

A call is a distinct request: the first `times` attempts of a faulted call get the fault,
and an identical request after them (the SDK's retry) is the same call, answered by the
recording. A different request ends the faulted call and is the next call. Calls are
counted across the flow (`model call N`) and within each conversation turn (`turn K model
call N`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from flowproof_cli.faults.plan import Fault


@dataclass(frozen=True)
class Fire:
    """Answer this attempt with the fault (`first`: the call's first attempt)."""

    fault: Fault
    first: bool
    position: int | None  # the recorded turn of the call, once known


@dataclass(frozen=True)
class Recover:
    """The identical request after the fault's attempts: the recording answers it."""

    fault: Fault
    position: int | None  # None at record before its answer was kept


@dataclass
class _Open:
    fault: Fault
    key: bytes
    attempts: int = 1
    position: int | None = None


@dataclass
class ModelCalls:
    """The model faults of one flow, and what became of each (`applied`, `not_applicable`,
    by fault label, read by the verdict)."""

    faults: tuple[Fault, ...] = ()
    calls: int = 0
    turn_calls: dict[int | None, int] = field(default_factory=dict)
    applied: dict[str, int] = field(default_factory=dict)
    not_applicable: dict[str, str] = field(default_factory=dict)
    _open: _Open | None = None

    def __post_init__(self) -> None:
        self.faults = tuple(fault for fault in self.faults if fault.at.boundary == "model")

    @property
    def active(self) -> bool:
        return bool(self.faults)

    def step(self, key: bytes, turn: int | None) -> Fire | Recover | None:
        """What happens to a request with match key `key`, made while conversation turn
        `turn` is open (None in a one-turn flow)."""
        current = self._open
        if current is not None and current.key == key:
            if current.attempts < current.fault.times:
                current.attempts += 1
                self.applied[current.fault.label] = current.attempts
                return Fire(current.fault, False, current.position)
            self._open = None
            return Recover(current.fault, current.position)
        self._open = None
        self.calls += 1
        self.turn_calls[turn] = self.turn_calls.get(turn, 0) + 1
        fault = self._fault_for(self.calls, turn, self.turn_calls[turn])
        if fault is None:
            return None
        self._open = _Open(fault, key)
        self.applied[fault.label] = 1
        return Fire(fault, True, None)

    def _fault_for(self, call: int, turn: int | None, in_turn: int) -> Fault | None:
        for fault in self.faults:
            at = fault.at
            if at.turn is None and at.call == call:
                return fault
            if at.turn is not None and at.turn == turn and at.call == in_turn:
                return fault
        return None

    def served_by(self, position: int) -> None:
        """The faulted call's recorded turn is `position` (replay: claimed; record: kept)."""
        if self._open is not None:
            self._open.position = position

    def withdraw(self, fault: Fault, why: str | None = None) -> None:
        """The fault did not apply after all: the call diverged, or the kind cannot alter
        this answer (`why`); the call is answered as any other."""
        self.applied.pop(fault.label, None)
        if why is not None:
            self.not_applicable[fault.label] = why
        self._open = None

    def never_applied(self) -> list[Fault]:
        """The faults whose call never came (nor was found not applicable)."""
        return [
            fault
            for fault in self.faults
            if fault.label not in self.applied and fault.label not in self.not_applicable
        ]
