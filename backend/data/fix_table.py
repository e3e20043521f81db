"""The one table of fixes: each row is one fix a user can ask for, with the
FixPlan option and value it sets, its `python -m backend.data fix` flag, the
checks it answers and the key of its button text in the Data tab.

Everything that lists fixes is built from it: the CLI flags (backend/data/cli.py),
the Data tab's fix buttons and the counts on them (ui/tabs/data.py), and the
"what to do" hint of each check in the report (backend/data/checks/specs.py).
A new fix is one row here plus its code in backend/data/fixes.py (or
pair_fixes.py) and its button text; tests/test_data_fix_table.py fails when a
row or any of its columns is missing.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from backend.data.fixes import FixPlan

FILL = None  # the value of the fill fix comes from the user (NAME=VALUE pairs), not from the table


@dataclass(frozen=True)
class Fix:
    key: str  # the Data tab's name for it (button elem_id data-fix-<key>)
    option: str  # the FixPlan field it sets
    value: Any  # what it sets the field to: True, a mode string, or FILL
    flag: str  # the `fix` command's flag for the option
    checks: tuple[str, ...]  # check ids it answers; the first one's count shows on its button ( () = none)
    text_key: str  # the button's text in ui/texts/data_texts.py
    help: str  # what it does, for `fix --help`

    @property
    def usage(self) -> str:
        """How the CLI asks for it: '--drop-empty', '--conflicts drop', '--fill NAME=VALUE'."""
        if self.value is True:
            return self.flag
        return f"{self.flag} {'NAME=VALUE' if self.value is FILL else self.value}"


FIXES: tuple[Fix, ...] = (
    Fix("fill", "fill", FILL, "--fill", ("placeholder",), "data.fix.fill",
        "fill {{NAME}} placeholders (once per name)"),
    Fix("drop_empty", "drop_empty", True, "--drop-empty", ("empty_field",), "data.fix.drop_empty",
        "drop rows with an empty message (pairs: an empty answer)"),
    Fix("strip_html", "strip_html", True, "--strip-html", ("html",), "data.fix.strip_html",
        "remove HTML tags and decode entities"),
    Fix("remove_control", "remove_control_chars", True, "--remove-control-chars", ("control_chars",),
        "data.fix.remove_control", "remove control, zero-width and U+FFFD characters"),
    Fix("normalize", "normalize", True, "--normalize", (), "data.fix.normalize", "Unicode NFC + whitespace"),
    Fix("drop_duplicates", "drop_duplicates", True, "--drop-duplicates", ("duplicate",),
        "data.fix.drop_duplicates", "drop rows identical to an earlier row"),
    Fix("drop_near_duplicates", "drop_near_duplicates", True, "--drop-near-duplicates", ("near_duplicate",),
        "data.fix.drop_near_duplicates", "drop rows equal to an earlier row after folding case and punctuation"),
    Fix("conflicts_keep_first", "conflicts", "keep-first", "--conflicts", ("conflicting_answers",),
        "data.fix.conflicts_keep_first", "keep the first row of each conflicting group"),
    Fix("conflicts_drop", "conflicts", "drop", "--conflicts", ("conflicting_answers",),
        "data.fix.conflicts_drop", "drop every row of a conflicting group (pairs: contradicting preferences)"),
    Fix("over_cutoff_drop", "over_cutoff", "drop", "--over-cutoff", ("over_cutoff", "response_cut"),
        "data.fix.over_cutoff_drop", "drop rows over cutoff_len (needs --model)"),
    Fix("over_cutoff_truncate", "over_cutoff", "truncate", "--over-cutoff", ("over_cutoff", "response_cut"),
        "data.fix.over_cutoff_truncate", "shorten the last answer to fit (needs --model)"),
    # preference pairs (backend/data/pair_fixes.py, checks in backend/data/checks/pairs.py)
    Fix("drop_empty_answers", "drop_empty", True, "--drop-empty", ("empty_answer",), "data.fix.drop_empty_answers",
        "drop rows with an empty message (pairs: an empty answer)"),
    Fix("drop_identical_pairs", "drop_identical_pairs", True, "--drop-identical-pairs", ("same_answer",),
        "data.fix.drop_identical_pairs", "drop preference pairs whose chosen equals rejected"),
    Fix("contradicting_drop", "conflicts", "drop", "--conflicts", ("contradicting_pair",),
        "data.fix.contradicting_drop", "drop every row of a conflicting group (pairs: contradicting preferences)"),
)

BY_KEY = {fix.key: fix for fix in FIXES}


def options() -> dict[str, list[Fix]]:
    """FixPlan field -> its table rows, in table order (one CLI flag per field)."""
    out: dict[str, list[Fix]] = {}
    for fix in FIXES:
        out.setdefault(fix.option, []).append(fix)
    return out


def fixes_for(check_id: str) -> list[Fix]:
    return [fix for fix in FIXES if check_id in fix.checks]


def hint_fix(check_id: str) -> str:
    """'fix --conflicts keep-first or --conflicts drop': the fixes that answer a check, as the CLI takes them."""
    usages = list(dict.fromkeys(fix.usage for fix in fixes_for(check_id)))
    return "fix " + " or ".join(usages) if usages else ""


def add_cli_flags(parser) -> None:
    """One argparse flag per FixPlan option, with the choices and help of its rows."""
    for option, rows in options().items():
        first = rows[0]
        if first.value is FILL:
            parser.add_argument(first.flag, dest=option, action="append", metavar="NAME=VALUE", help=first.help)
        elif first.value is True:
            parser.add_argument(first.flag, dest=option, action="store_true", help=first.help)
        else:
            choices = tuple(dict.fromkeys(fix.value for fix in rows))
            helps = "; ".join(dict.fromkeys(f"{fix.value}: {fix.help}" for fix in rows))
            parser.add_argument(first.flag, dest=option, choices=choices, help=helps)


def plan_values(values: dict) -> dict:
    """The FixPlan fields among `values` (e.g. parsed CLI arguments or the Data tab's plan)."""

    names = {f.name for f in dataclasses.fields(FixPlan)}
    return {k: v for k, v in values.items() if k in names}
