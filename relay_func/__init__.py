"""The timer-triggered Function of the notice relay (ADR-0051): one NoticeSweep per tick of
function_app.py's Host when `Notices__Runner=Function`, nothing otherwise."""

from __future__ import annotations

import azure.functions as func

from shared.bootstrap import Host


def blueprint(host: Host) -> func.Blueprint:
    bp = func.Blueprint()

    @bp.function_name("notice_relay")
    @bp.timer_trigger(arg_name="timer", schedule="%Notices__Schedule%", use_monitor=True)
    def notice_relay(timer: func.TimerRequest) -> None:
        # The trigger only translates: the host decides.
        host.relay.tick(past_due=timer.past_due)

    return bp
