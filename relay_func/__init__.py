"""The timer-triggered Function of the notice relay (ADR-0051): one NoticeSweep per tick when
`Notices__Runner=Function`, nothing otherwise. The host it ticks is function_app.py's, whose
start read and checked the settings (ADR-0048 D6, ADR-0051 D3) and announced the relay."""

from __future__ import annotations

from typing import TYPE_CHECKING

import azure.functions as func

if TYPE_CHECKING:
    from shared.bootstrap import Host


def blueprint(host: Host) -> func.Blueprint:
    relay = host.relay
    bp = func.Blueprint()

    @bp.function_name("notice_relay")
    @bp.timer_trigger(arg_name="timer", schedule="%Notices__Schedule%", use_monitor=True)
    def notice_relay(timer: func.TimerRequest) -> None:
        # The trigger only translates: the host decides.
        relay.tick(past_due=timer.past_due)

    return bp
