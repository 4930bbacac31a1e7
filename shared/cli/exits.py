"""Exit codes of `azurebank` (DESIGN §8; docs/cli.md lists them). argparse's own usage error (2)
is moved to 64 so that 2 keeps its one meaning: nothing to do."""

from __future__ import annotations

OK = 0
FAILURE = 1  # the command failed; for notify: another failure left rows owed; for audit: broken
NOTHING_TO_DO = 2  # notify: nothing owed, or everything owed is held under another's live lease
REFUSED_FILE = 6  # notify: a notice file already exists (ADR-0048 D3)
USAGE = 64  # EX_USAGE: the command line itself is wrong
CONFIG = 78  # EX_CONFIG: settings refused; the message names the key and the fix
