"""`delay: SECONDS`: the recorded answer, after a wait (the agent's own timeout under test)."""

from __future__ import annotations

from dataclasses import replace

from flowproof_cli.dialects import Rendered
from flowproof_cli.faults.kinds.call import FaultedCall
from flowproof_cli.faults.plan import Fault


def answer(fault: Fault, call: FaultedCall) -> Rendered | str:
    return replace(call.rendered(call.response), delay_s=float(fault.value))
