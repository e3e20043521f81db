"""Where things live on disk. The workspace folder is the only state shared
between the UI process and the training workers (docs/CONTRACTS.md, the workspace)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

DEFAULT_WORKSPACE = Path(os.environ.get("FINETUNE_STUDIO_WORKSPACE", "workspace"))


@dataclass(frozen=True)
class Workspace:
    root: Path

    @property
    def datasets_dir(self) -> Path:
        return self.root / "datasets"

    @property
    def runs_dir(self) -> Path:
        return self.root / "runs"

    @property
    def models_dir(self) -> Path:
        return self.root / "models"

    @property
    def settings_file(self) -> Path:
        """Last used UI settings, restored on the next launch."""
        return self.root / "settings.json"

    def ensure(self) -> Workspace:
        for folder in (self.datasets_dir, self.runs_dir, self.models_dir):
            folder.mkdir(parents=True, exist_ok=True)
        return self

    def contains(self, path: str | Path) -> bool:
        """True when `path` resolves inside the workspace (symlinks followed)."""
        try:
            Path(path).resolve().relative_to(self.root.resolve())
        except ValueError:
            return False
        return True

    @classmethod
    def for_run_dir(cls, run_dir: Path) -> Workspace:
        """The workspace that holds `run_dir` (workspace/runs/<id>), or the default."""
        run_dir = Path(run_dir).resolve()
        if run_dir.parent.name == "runs":
            return cls(run_dir.parent.parent)
        return cls(DEFAULT_WORKSPACE.resolve())
