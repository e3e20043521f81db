"""The offline demo dataset in the workspace: the demo model's fact rows
(backend/models/demo_facts.py) written once as datasets/demo/."""

from __future__ import annotations

import json
from pathlib import Path

from backend.models.demo_facts import build_demo_rows
from backend.storage.atomic_files import atomic_write_text

# Bump when the rows of backend/models/demo_facts.py change: ensure_demo_dataset rewrites an older copy.
DEMO_DATA_VERSION = 2
DEMO_DATASET_NAME = "demo"


def ensure_demo_dataset(datasets_dir: Path) -> Path:
    """Write datasets_dir/demo/{data.jsonl,meta.json} once; rewrite on a new version."""
    folder = Path(datasets_dir) / DEMO_DATASET_NAME
    meta_file = folder / "meta.json"
    if meta_file.exists():
        try:
            if json.loads(meta_file.read_text(encoding="utf-8")).get("version") == DEMO_DATA_VERSION:
                return folder
        except (OSError, ValueError):
            pass  # unreadable meta: rewrite both files below
    folder.mkdir(parents=True, exist_ok=True)
    rows = build_demo_rows()
    lines = "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)
    meta = {
        "name": DEMO_DATASET_NAME,
        "source": "generated",
        "description": "Bilingual English/Chinese demo instructions written by backend/data/demo_rows.py",
        "format": "messages",
        "rows": len(rows),
        "version": DEMO_DATA_VERSION,
    }
    # Data first, meta last: a folder whose meta is current always has its data.
    atomic_write_text(folder / "data.jsonl", lines)
    atomic_write_text(meta_file, json.dumps(meta, indent=2, ensure_ascii=False) + "\n")
    return folder
