"""Ray's own output goes to ray.log in the run folder, so train.log stays the user's.

With log_to_driver, Ray streams the stdout / stderr of every actor to the driver, which
prints it, into train.log (the driver's output). That stream is mostly Ray's internals:
its TrainController and PlacementGroupCleaner ("Failed to query Ray Train Controller actor
state", every few seconds on a busy machine), core-worker warnings, the workers' library
warnings, and bytecode dumps that `dill` (hashing datasets' map functions) prints when it
races another thread for sys.stdout. Rank 0 of the workers writes the run's own log lines
into train.log itself (backend.training.cli.setup_logging), so the whole stream is kept
in ray.log, each line prefixed as Ray prints it, for when Ray itself misbehaves.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path

RAY_LOG = "ray.log"
# ray._private.worker (ray 2.60, the version guards.RAY_PIP installs): the handler name under
# which ray.init(log_to_driver=True) prints the stream to the driver's stdout / stderr.
RAY_PRINTER = "ray_print_logs"
OURS = "finetune_studio_ray_log"


class RayLogFile:
    """Ray's driver-side logger and the actors' stream, appended to RUN/ray.log."""

    def __init__(self, run_dir: Path):
        self.path = Path(run_dir) / RAY_LOG
        # Open for the whole Ray run (closed by close()); line-buffered: readable while it runs.
        self._file = open(self.path, "a", encoding="utf-8", buffering=1)  # noqa: SIM115
        self._lock = threading.Lock()
        self._handler = logging.StreamHandler(self._file)
        self._handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))

    def before_init(self) -> None:
        """Before ray.init(configure_logging=False), which clears the "ray" logger's handlers (its
        messages would then reach stderr, train.log, through logging's last resort): meanwhile the
        handler sits one level down, on "ray._private", where ray.init's own messages come from."""
        init_logger = logging.getLogger("ray._private")
        init_logger.addHandler(self._handler)
        init_logger.setLevel(logging.INFO)

    def after_init(self) -> None:
        """Ray's Python logger and the actors' stream (instead of the driver's stdout / stderr) come here."""
        from ray._private.ray_logging import global_worker_stdstream_dispatcher as dispatcher

        logging.getLogger("ray._private").removeHandler(self._handler)
        ray_logger = logging.getLogger("ray")
        ray_logger.handlers = [self._handler]
        ray_logger.setLevel(logging.INFO)
        ray_logger.propagate = False
        dispatcher.remove_handler(RAY_PRINTER)
        dispatcher.add_handler(OURS, self._write_batch)

    def _write_batch(self, data: dict) -> None:
        who = data.get("actor_name") or data.get("task_name") or ""
        prefix = f"({who} pid={data.get('pid')}) " if who else f"({data.get('pid')}) "
        with self._lock:
            for line in data.get("lines", []):
                self._file.write(prefix + line + "\n")

    def close(self) -> None:
        """After ray.shutdown, whose log thread is then gone."""
        from ray._private.ray_logging import global_worker_stdstream_dispatcher as dispatcher

        dispatcher.remove_handler(OURS)
        for name in ("ray", "ray._private"):
            logging.getLogger(name).removeHandler(self._handler)
        with self._lock:
            self._file.close()
