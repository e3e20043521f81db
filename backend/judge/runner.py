"""One judgement from start to file, the single description the command line
(and a tab) fills: prepare it (the rows, the template, the rubric: every
refusal happens here, before a call), plan it (how many calls the cache
leaves to make), run it, write RUN/eval/judge/<name>.json."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from backend.judge import calibration, graded, head_to_head, sources, templates
from backend.judge.asking import Asker, plan_calls
from backend.judge.cache import JudgeCache
from backend.judge.client import JudgeClient, JudgeEndpoint
from backend.judge.judgement_file import write_result
from backend.judge.sources import JudgeRow
from backend.runs.workspace import Workspace

MODES = ("pairwise", "graded", "calibration")


@dataclass
class Judgement:
    run_dir: Path
    endpoint: JudgeEndpoint
    mode: str  # one of MODES
    names: list[str] = field(default_factory=list)  # pairwise: [A, B]; graded: checkpoints (empty: all the rows have)
    source: str = "identity"  # sources.SOURCES; calibration always reads the votes
    data: Path | None = None  # source "file": the JSONL rows
    template: str | None = None  # None: the run's tuned pairwise template, or the default of the mode
    rubric: str | None = None  # graded: the rubric text (None: the default of rubric_kind)
    rubric_kind: str = templates.DEFAULT_KIND
    max_samples: int | None = None
    name: str | None = None  # the result's file name (default: from the mode and checkpoints)
    workspace: Workspace | None = None


@dataclass
class Prepared:
    judgement: Judgement
    asker: Asker
    rows: list[JudgeRow]
    names: list[str]
    template: str
    rubric: str

    @property
    def prompts(self) -> list[tuple[str, tuple[str, ...]]]:
        if self.judgement.mode == "calibration":  # each vote compares its own two candidates
            return [p for row in self.rows
                    for p in head_to_head.planned_prompts([row], *row.meta["candidates"], self.template)]
        if self.judgement.mode == "graded":
            return graded.planned_prompts(self.rows, self.names, self.template, self.rubric)
        return head_to_head.planned_prompts(self.rows, self.names[0], self.names[1], self.template)


def prepare_judgement(judgement: Judgement) -> Prepared:
    """The rows, names, template and rubric of `judgement`; a UserError (a sentence) for anything unusable."""
    j = judgement
    workspace = j.workspace or Workspace.for_run_dir(j.run_dir)
    asker = Asker(JudgeClient(j.endpoint), JudgeCache(workspace.root))
    source = "votes" if j.mode == "calibration" else j.source
    names = list(j.names)
    rows = sources.rows_for(source, j.run_dir, names, j.data)
    if not names and j.mode == "graded":
        names = sorted(rows[0].answers)
        rows = [row for row in rows if all(n in row.answers for n in names)]
    rows = rows[:j.max_samples] if j.max_samples else rows
    kind = "graded" if j.mode == "graded" else "pairwise"
    if j.template is not None:
        template = templates.check_template(j.template, kind, "given")
    else:
        template = templates.GRADED_TEMPLATE if kind == "graded" else calibration.active_template(j.run_dir)
    rubric = ""
    if j.mode == "graded":
        rubric = templates.check_rubric(j.rubric, "given") if j.rubric is not None else templates.rubric_for(j.rubric_kind)
    return Prepared(j, asker, rows, names, template, rubric)


def plan(prepared: Prepared) -> dict:
    """{"prompts", "cached", "calls", "rows"}: what running it will cost, before any call."""
    return {**plan_calls(prepared.asker.client, prepared.asker.cache, prepared.prompts), "rows": len(prepared.rows)}


def run_judgement(prepared: Prepared) -> tuple[dict, Path]:
    """(the result, the file it was written to)."""
    j, asker = prepared.judgement, prepared.asker
    planned = plan(prepared)
    if j.mode == "calibration":
        result = {"mode": "calibration", **calibration.calibrate(asker, prepared.rows, prepared.template)}
    elif j.mode == "graded":
        result = graded.judge_graded(asker, prepared.rows, prepared.names, prepared.template, prepared.rubric)
    else:
        result = head_to_head.judge_pairwise(asker, prepared.rows, *prepared.names, prepared.template)
    result.update(source="votes" if j.mode == "calibration" else j.source, plan=planned)
    return result, write_result(j.run_dir, result, asker, prepared.template, j.name)
