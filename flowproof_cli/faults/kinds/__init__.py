"""The model fault kinds, one module each, found by their kind name.

Each kind turns a fault and the call it hits into the answer the agent gets instead of the
recorded one (`Rendered`, which may carry headers, a delay or a reset), or says why it
cannot apply to that call (a `stream:` fault on an answer that was not streamed). Adding a
kind is a module with an `answer(fault, call)` function and its line in `KINDS`.
"""

from __future__ import annotations

from collections.abc import Callable

from flowproof_cli.dialects import Rendered
from flowproof_cli.faults.kinds import delay, malformed, status, stream
from flowproof_cli.faults.kinds.call import FaultedCall
from flowproof_cli.faults.plan import ANSWER, CUT, DELAY, ERROR_EVENT, MALFORMED, RESET, Fault

KindAnswer = Callable[[Fault, FaultedCall], Rendered | str]

KINDS: dict[str, KindAnswer] = {
    ANSWER: status.answer,
    RESET: status.reset,
    DELAY: delay.answer,
    CUT: stream.cut,
    ERROR_EVENT: stream.error_event,
    MALFORMED: malformed.answer,
}


def fault_answer(fault: Fault, call: FaultedCall) -> Rendered | str:
    """The answer `fault` gives `call`, or why it does not apply to it."""
    return KINDS[fault.kind](fault, call)


__all__ = ["KINDS", "FaultedCall", "fault_answer"]
