"""The fix table (backend/data/fix_table.py) is the one list of fixes: every row
has every column, and the CLI flags, the Data tab's buttons and the report's
hints are the table's."""

from __future__ import annotations

import dataclasses

import pytest

from backend.data.checks import BY_ID, SPECS
from backend.data.checks import specs as spec_module
from backend.data.cli import build_parser
from backend.data.fix_table import FILL, FIXES, Fix, fixes_for, plan_values
from backend.data.fixes import FixPlan
from ui.tabs import data
from ui.texts.data_texts import TEXT

NO_CHECK = {"normalize"}  # fixes with nothing to count: no check looks for unnormalised text
PLAN_FIELDS = {f.name: f for f in dataclasses.fields(FixPlan)}


@pytest.mark.parametrize("fix", FIXES, ids=lambda f: f.key)
def test_every_fix_has_every_column(fix: Fix):
    for column in dataclasses.fields(Fix):
        value = getattr(fix, column.name)
        if column.name == "value":
            assert value is True or (isinstance(value, str) and value) or (value is FILL and fix.option == "fill")
        elif column.name == "checks":
            assert isinstance(value, tuple) and (value or fix.key in NO_CHECK), f"{fix.key}: which check does it answer?"
            assert set(value) <= set(BY_ID), f"{fix.key}: unknown check {set(value) - set(BY_ID)}"
        else:
            assert isinstance(value, str) and value.strip(), f"{fix.key}: column {column.name} is empty"
    assert fix.option in PLAN_FIELDS, f"{fix.key}: {fix.option} is not a FixPlan field"
    assert fix.flag.startswith("--") and fix.text_key.startswith("data.fix.")
    assert TEXT[fix.text_key].get("en") and TEXT[fix.text_key].get("zh"), f"{fix.text_key} needs en and zh texts"


def test_the_table_covers_every_plan_option_and_keys_are_unique():
    assert {fix.option for fix in FIXES} == set(PLAN_FIELDS)
    assert len({fix.key for fix in FIXES}) == len(FIXES)
    # One flag per option, and no two options share a flag.
    assert len({(fix.option, fix.flag) for fix in FIXES}) == len({fix.option for fix in FIXES}) == \
        len({fix.flag for fix in FIXES})


@pytest.mark.parametrize("fix", FIXES, ids=lambda f: f.key)
def test_the_cli_flag_sets_the_option_the_button_sets(fix: Fix):
    args = build_parser().parse_args(["fix", "data.json", "--out", "x", *fix.usage.split()])
    values = plan_values(vars(args))
    assert set(values) == set(PLAN_FIELDS)  # every option is a flag of `fix`
    expected = ["NAME=VALUE"] if fix.value is FILL else fix.value
    assert values[fix.option] == expected
    assert data._fix_target(fix.key) == (fix.option, fix.value)


def test_the_data_tab_has_one_button_per_fix():
    buttons = [key for key in data.OUT_KEYS if key.startswith("fix:")]
    assert buttons == [f"fix:{fix.key}" for fix in FIXES]


def test_report_hints_name_the_fixes_of_the_table():
    for template in spec_module._SPECS:  # instruction checks: a hint names a fix exactly when the table has one
        assert ("{fix}" in template.hint) == bool(fixes_for(template.id)), template.id
    for template in spec_module._PAIR_SPECS:
        assert "{fix}" not in template.hint or fixes_for(template.id), template.id
    for spec in SPECS:
        for fix in fixes_for(spec.id):
            assert fix.usage in spec.hint, (spec.id, spec.hint)
        assert "{fix}" not in spec.hint
    assert BY_ID["same_answer"].hint == "Drop them: fix --drop-identical-pairs"
    assert BY_ID["conflicting_answers"].hint.endswith("fix --conflicts keep-first or --conflicts drop")
