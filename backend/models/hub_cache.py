"""Hub models on disk: where the Hugging Face cache holds a hub id, looked up
offline, the way training found it.

A run on a preset (`Qwen/Qwen2.5-0.5B-Instruct`) stores the hub id in its
config.yaml; `from_pretrained` loaded it from the cache
(`HF_HUB_CACHE`, by default `HF_HOME/hub`, laid out as
`models--Org--Name/snapshots/<commit>/` with `refs/main` naming the commit).
Whatever needs the files later (the merge of an export) finds them there
through huggingface_hub's own lookup, never over the network.
"""

from __future__ import annotations

import re
from pathlib import Path

from huggingface_hub import constants, snapshot_download
from huggingface_hub.errors import LocalEntryNotFoundError

# owner/name as the hub spells repository ids (one slash, no path tricks).
HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]{0,95}/[A-Za-z0-9][\w.-]{0,95}$")
_SNAPSHOT = re.compile(r"models--(?P<owner>[^/]+?)--(?P<name>[^/]+)/snapshots/[^/]+/?$")


def looks_like_hub_id(name: str) -> bool:
    """True for 'Org/Name' that is not a local folder."""
    return bool(HUB_ID.match(name or "")) and ".." not in name and not Path(name).expanduser().exists()


def hub_cache_dir() -> str:
    """The hub cache this process reads (HF_HUB_CACHE, else HF_HOME/hub, else ~/.cache/huggingface/hub)."""

    return constants.HF_HUB_CACHE


def cached_snapshot(hub_id: str, revision: str = "main") -> tuple[Path | None, str]:
    """(snapshot folder, "") when the cache holds `hub_id`, else (None, why not), without the network."""

    try:
        return Path(snapshot_download(hub_id, revision=revision, local_files_only=True)), ""
    except LocalEntryNotFoundError:
        return None, f"it is not in the Hugging Face cache ({hub_cache_dir()})"
    except Exception as error:  # noqa: BLE001 - an incomplete snapshot, a bad id: said, not raised
        return None, f"its copy in the Hugging Face cache cannot be used ({type(error).__name__}: {error})"


def hub_id_of(path: str | Path) -> str | None:
    """'Org/Name' for a folder inside the hub cache (…/models--Org--Name/snapshots/<commit>), else None."""
    match = _SNAPSHOT.search(Path(path).as_posix())
    return f"{match['owner']}/{match['name']}" if match else None
