"""Exit codes of `azurebank` (docs/cli.md lists them). argparse's own usage error (2)
is moved to 64 so that 2 keeps its one meaning: nothing to do."""

from __future__ import annotations

from shared.notices.notify import NotifyExit

OK = 0
FAILURE = 1  # the command failed; for notify: another failure left rows owed; for audit: broken
# notify's own (ADR-0048 D5): its protocol decides them, shared.notices.notify.
NOTHING_TO_DO = int(NotifyExit.NOTHING_TO_DO)  # nothing owed, or all held under a live lease
REFUSED_FILE = int(NotifyExit.REFUSED_FILE)  # a notice file already exists (ADR-0048 D3)
USAGE = 64  # EX_USAGE: the command line itself is wrong
CONFIG = 78  # EX_CONFIG: settings refused; the message names the key and the fix
