"""A stand-in ``torchrun`` agent and its worker, for :mod:`tests.training.test_agent_killed`.

``python orphan.py agent MODE`` starts ``python orphan.py worker MODE`` (same stdout) and waits to be killed. The
worker imports ``ranklit`` (which reads its agent's PID), prints ``ready <pid>``, waits until it was re-parented (the
test killed the agent), and only then starts the watch, as a worker whose agent died during the command's imports:
``MODE`` ``default`` calls :func:`ranklit.training.watch_parent`; ``ignored`` ignores ``SIGTERM`` and watches with a
2 s grace. A worker still running 30 s later prints ``trained on``.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

if __name__ == "__main__":
    role, mode = sys.argv[1:3]
    if role == "agent":
        subprocess.Popen([sys.executable, __file__, "worker", mode])
        time.sleep(120)
        raise SystemExit(0)
    import ranklit  # noqa: F401  (the first import of ranklit reads the agent's PID)

    agent = os.getppid()
    sys.stdout.write(f"ready {os.getpid()}\n")
    sys.stdout.flush()
    while os.getppid() == agent:
        time.sleep(0.05)
    if mode == "ignored":
        import threading

        from ranklit.training import _parent_watch

        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        threading.Thread(target=_parent_watch._watch, args=(agent, 2.0), daemon=True).start()
    else:
        from ranklit.training import watch_parent

        watch_parent()
    time.sleep(30)
    sys.stdout.write("trained on\n")
