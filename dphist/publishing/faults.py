"""Named checkpoints of the release transaction, where the fault suite stops a run on purpose.

``DPHIST_FAULT_AT=<checkpoint>[:SIGNAL]`` makes the process send itself SIGNAL (default SIGKILL) when it reaches
that checkpoint.  The checkpoints are listed in :mod:`dphist.publishing.transaction`.  It can only stop a run, never change what
a run releases or spends; tests/test_transaction.py uses it to kill runs at every state.
"""

from __future__ import annotations

import os
import signal

FAULT_ENV = "DPHIST_FAULT_AT"


def checkpoint(name: str) -> None:
    """Stop this process here if ``$DPHIST_FAULT_AT`` names this checkpoint."""
    spec = os.environ.get(FAULT_ENV)
    if not spec:
        return
    at, _, sig = spec.partition(":")
    if at == name:
        os.kill(os.getpid(), getattr(signal, sig or "SIGKILL"))
