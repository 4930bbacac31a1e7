"""The timer-triggered Function of the notice relay (ADR-0051): one NoticeSweep per tick when
`Notices__Runner=Function`, nothing otherwise.

Importing this module is the host's start: the settings are read and checked for this host
(ADR-0048 D6, ADR-0051 D3) and its services composed (shared.bootstrap.function_host), so a
refused set raises SettingsError naming the key and the fix and the host loads no function.
Nothing connects here; the engine connects on the first tick.
"""

from __future__ import annotations

import azure.functions as func

from api_funcs.telemetry import function_host_telemetry
from shared.bootstrap import function_host

host = function_host(function_host_telemetry()).relay

bp = func.Blueprint()


@bp.function_name("notice_relay")
@bp.timer_trigger(arg_name="timer", schedule="%Notices__Schedule%", use_monitor=True)
def notice_relay(timer: func.TimerRequest) -> None:
    # The trigger only translates: the host decides.
    host.tick(past_due=timer.past_due)
