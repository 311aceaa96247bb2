"""The PID of the process that started this one, read when ``ranklit`` is first imported: in a ``torchrun`` worker
(``TORCHELASTIC_RUN_ID`` set), its agent.

Read here, at the first line of ranklit a worker runs, rather than when :func:`ranklit.training.watch_parent` starts:
the command's imports take seconds (10 s on a loaded 2-core machine), and an agent killed meanwhile has already left
its workers with another parent (PID 1, or a subreaper), which a watch started then would take for the agent and
watch forever. Only the time from the worker's start to this import (the interpreter's start-up, a fraction of a
second) is left unseen.
"""

from __future__ import annotations

import os

#: The parent of this process when ``ranklit`` was first imported, in a ``torchrun`` worker; ``None`` elsewhere.
AGENT_PID: int | None = os.getppid() if "TORCHELASTIC_RUN_ID" in os.environ else None
