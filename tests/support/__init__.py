"""The suite's helpers, one module per concern; a test imports from the module it needs:

- `checkout`: this checkout's root and a fresh interpreter on its code (`run_python`);
- `connections`: a port nothing listens on, and the connections engines try to open;
- `fault_proxy`: a TCP proxy between the app and PostgreSQL whose faults (a black hole, a
  reset, a refusal, a half-open cut, a lost commit reply, …) are switched at runtime;
- `hosts`: a test host's settings (the suite's keys, its contact), the app in-process, a relay
  host with a stand-in sweep;
- `users`: the one `add_user` (and `make_user`, committed), PINs;
- `tokens`: a bearer token for a user;
- `money`: the money path through HTTP (`Bank`, `open_bank`, the operations' paths);
- `notices`: owed notices, their rows read back, a sweep, honest failing transports;
- `audit`: `azurebank audit verify` run as a process;
- `jwks`: a local JWKS endpoint serving the test's keys;
- `served`: real `azurebank` processes for the e2e ring;
- `services`: a missing service is a skip locally and a failure under CI=true;
- `leak_watch`: no secret in any log record or body;
- `tsql_parse`: every statement the code executes, parsed as T-SQL.

Fixtures live in the conftest.py files. The contract tests, which stay as written, import their
helpers from the package itself: those names are re-exported here and nowhere else.
"""

from tests.support.hosts import CHAIN_KEY, SIGNING_KEY, api_client, host_settings
from tests.support.money import unique_key
from tests.support.tokens import bearer
from tests.support.users import FAST_HASH, make_user

__all__ = [
    "CHAIN_KEY",
    "FAST_HASH",
    "SIGNING_KEY",
    "api_client",
    "bearer",
    "host_settings",
    "make_user",
    "unique_key",
]
