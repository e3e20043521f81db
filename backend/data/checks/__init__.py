"""Checks: find what is wrong with a dataset before a GPU hour is spent."""

from backend.data.checks.report import CheckResult, CheckSpec, Report, TokenStats
from backend.data.checks.run import check_file, check_rows
from backend.data.checks.specs import BY_ID, SPECS

__all__ = ["BY_ID", "SPECS", "CheckResult", "CheckSpec", "Report", "TokenStats", "check_file", "check_rows"]
