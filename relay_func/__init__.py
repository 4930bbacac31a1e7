"""The timer-triggered Function of the notice relay (ADR-0051): NoticeSweep when Runner=Function."""

import azure.functions as func

bp = func.Blueprint()
