"""Who serves the queue (queue.py): one process at a time, the holder of runs/.scheduler.lock.

The app holds it while it is open (a daemon thread ticks every `interval_s`);
`python -m backend.train --config run.yaml --queue` waits for its run by
ticking the same way, so a queue with no app open still progresses while a
command-line run waits in it. A process that cannot take the lock only
watches: the holder starts the runs. When the holder ends (closed, crashed),
the kernel releases the lock and the next tick of another process takes it.
Taking the lock is for order, not for safety: every start also happens
under the launch lock and re-reads status.json there (RunStore._launch).
"""

from __future__ import annotations

import logging
import threading

from backend.runs.queue import advance, waiting_runs
from backend.runs.store import RunStore
from backend.storage.file_lock import try_file_lock

SCHEDULER_LOCK = ".scheduler.lock"
log = logging.getLogger(__name__)


class QueueScheduler:
    """Starts waiting runs when their devices free up, while this process holds the scheduler lock."""

    def __init__(self, store: RunStore, interval_s: float = 2.0):
        self.store = store
        self.interval_s = interval_s
        self._handle = None  # the open lock file while this scheduler serves the queue
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def serving(self) -> bool:
        return self._handle is not None

    def tick(self) -> list[str]:
        """One round: take the lock if free, reap this store's finished children, start what is due.
        Returns the run ids started."""
        if self._handle is None:
            self._handle = try_file_lock(self.store.runs_dir / SCHEDULER_LOCK)
            if self._handle is None:
                return []  # another process serves the queue
        self.store.reap()
        if not waiting_runs(self.store):
            return []
        return advance(self.store)

    def start(self) -> QueueScheduler:
        """Tick in a daemon thread until stop() (or the process ends)."""
        self._thread = threading.Thread(target=self._loop, name="queue-scheduler", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)
        self.release()

    def release(self) -> None:
        if self._handle is not None:
            self._handle.close()  # closing the file releases the flock
            self._handle = None

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                self.tick()
            except Exception:  # a bad run folder must not end the thread that serves every other run
                log.exception("queue scheduler tick failed")
            self._stop.wait(self.interval_s)
