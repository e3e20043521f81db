"""Task files and folders named for a benchmark, checked before lm-eval loads: a folder is searched
within bounds, and an include that comes back round a circle is refused with its chain."""

from __future__ import annotations

import pytest

from backend.evaluation import benchmark_specs
from backend.evaluation.benchmark_specs import BenchmarkError, resolve_specs
from backend.models.local.walk import Limits

TASK = ("task: quiz\ndataset_path: json\ndataset_kwargs: {data_files: {test: %s}}\ntest_split: test\n"
        "output_type: generate_until\ndoc_to_text: '{{q}}'\ndoc_to_target: '{{a}}'\n")


def _refusal(tmp_path, item: str) -> str:
    with pytest.raises(BenchmarkError) as raised:
        resolve_specs([item], tmp_path / "workspace")
    return str(raised.value)


def test_a_task_folder_is_found_within_its_bounds(tmp_path):
    data = tmp_path / "quiz.jsonl"
    data.write_text('{"q": "2+2?", "a": "4"}\n')
    folder = tmp_path / "tasks" / "mine"
    folder.mkdir(parents=True)
    (folder / "quiz.yaml").write_text(TASK % data)
    (folder / "notes.txt").write_text("not a task")
    specs, others = resolve_specs([str(tmp_path / "tasks")], tmp_path / "workspace")
    assert [s.name for s in specs] == ["quiz"] and others == []


def test_a_folder_too_big_to_search_is_refused_with_the_bound_it_hit(tmp_path, monkeypatch):
    deep = tmp_path / "deep"
    (deep / "a" / "b" / "c" / "d" / "e").mkdir(parents=True)
    (deep / "a" / "b" / "c" / "d" / "e" / "quiz.yaml").write_text("task: quiz\n")
    said = _refusal(tmp_path, str(deep))
    assert "is too big to search for task files" in said and "4 folders" in said, said

    many = tmp_path / "many"
    many.mkdir()
    for index in range(benchmark_specs.MAX_TASK_FILES + 1):
        (many / f"t{index}.yaml").write_text("task: t\n")
    assert f"holds more than {benchmark_specs.MAX_TASK_FILES} YAML files" in _refusal(tmp_path, str(many))

    monkeypatch.setattr(benchmark_specs, "TASK_FOLDER_LIMITS", Limits(seconds=0.0))
    said = _refusal(tmp_path, str(tmp_path / "deep"))
    assert "is too big to search for task files (not searched through in 0 s)" in said, said


def test_an_include_round_a_circle_is_refused_with_its_chain(tmp_path):
    first, second = tmp_path / "first.yaml", tmp_path / "second.yaml"
    first.write_text("include: second.yaml\ntask: first\n")
    second.write_text("include: first.yaml\n")
    said = _refusal(tmp_path, str(first))
    assert "includes itself round a circle" in said and "first.yaml -> " in said and "second.yaml" in said, said
    itself = tmp_path / "itself.yaml"
    itself.write_text("include: itself.yaml\ntask: me\n")
    assert "includes itself round a circle" in _refusal(tmp_path, str(itself))
