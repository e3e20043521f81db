"""What one fix did: the record every fix returns, instruction rows (fixes.py)
and preference rows (pair_fixes.py) alike. It sits below both, so neither fix
module needs the other to say what it changed."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class FixStep:
    id: str
    params: dict
    changed: list[int] = field(default_factory=list)  # source row numbers whose text changed
    removed: list[int] = field(default_factory=list)  # source row numbers dropped

    def to_dict(self) -> dict:
        return {"id": self.id, "params": self.params, "changed": len(self.changed), "removed": len(self.removed)}
