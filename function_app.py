"""The Azure Functions entry point, composition only: importing it starts the one Host for both
blueprints (docs/architecture.md#the-composition-root). A refused setting raises SettingsError
naming the key and the fix, so the host indexes no function; nothing connects here."""

import os

import azure.functions as func

from api_funcs.long_lived import long_lived_build

# The app uses no pydantic plugin; looking for one reads every installed package's entry points
# when the first request builds its models (~5 ms of a cold start). An operator may still set it.
os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")

# What indexing builds lives for the process: built without the collector's walks, then frozen.
with long_lived_build():
    import relay_func
    from api_funcs import functions as http_functions
    from api_funcs.telemetry import host_telemetry
    from shared.bootstrap import Host
    from shared.settings import load_settings

    host = Host("function", load_settings(), telemetry=host_telemetry())
    app = func.FunctionApp()
    app.register_functions(http_functions.blueprint(host))
    app.register_functions(relay_func.blueprint(host))
