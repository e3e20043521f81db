"""The CPU an open page costs while it sits on each tab: the browser's (headless chromium) and the
app's, over a window, after every tab was visited once (gradio mounts a tab's components on its
first visit, and its timers tick from then on).

Every timer tick makes gradio 6's page walk its component tree for each loading status it holds
(ui/tab_timers.py says why); a run training on the same CPU shares what the page burns. Compares
the checkout with a baseline revision in the same run (a `git worktree` of `--baseline-rev`), each
app on the same workspace, alternating within each repetition.

    .venv/bin/python bench/page_cpu.py --workspace WS [--baseline-rev REV] [--seconds 10] [--reps 2]

WS: a workspace with at least one finished run (the Runs tab draws its charts), for instance a
browser test's or `python -m backend.train`'s.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from tests.browser.harness import AppProcess, launch_browser  # noqa: E402

TABS = ("Data", "Train", "Runs", "Chat", "Evaluate", "Export")


class CheckoutApp(AppProcess):
    """AppProcess started from another checkout's app.py (the baseline worktree)."""

    def __init__(self, checkout: Path, workspace: Path):
        super().__init__(workspace, log_path=Path(tempfile.gettempdir()) / f"page-cpu-{checkout.name}.log")
        self.checkout = checkout
        self.env = {**self.env, "PYTHONPATH": str(checkout)}

    def command(self) -> list[str]:
        return [sys.executable, str(self.checkout / "app.py"), "--port", str(self.port),
                "--workspace", str(self.workspace), "--recipe", "demo-tiny"]


def cpu_seconds(processes: list[psutil.Process]) -> float:
    total = 0.0
    for process in processes:
        try:
            times = process.cpu_times()
            total += times.user + times.system
        except psutil.NoSuchProcess:
            pass
    return total


def measure(checkout: Path, workspace: Path, seconds: float) -> dict[str, dict[str, float]]:
    """{tab: {"browser": CPU-s, "app": CPU-s}} over `seconds` on each tab."""
    from playwright.sync_api import sync_playwright

    app = CheckoutApp(checkout, workspace).start()
    try:
        with sync_playwright() as playwright:
            browser = launch_browser(playwright)
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.goto(app.url, wait_until="domcontentloaded")
            page.wait_for_selector("#shell-tabs")
            for name in TABS:  # every tab mounted, as after a user's first look around
                page.get_by_role("tab", name=name).click()
                page.wait_for_timeout(2000)
            me, app_process = psutil.Process(), psutil.Process(app.process.pid)
            results = {}
            for name in TABS:
                page.get_by_role("tab", name=name).click()
                page.wait_for_timeout(2000)
                app_tree = [app_process, *app_process.children(recursive=True)]
                browser_tree = [p for p in me.children(recursive=True) if p.pid not in {a.pid for a in app_tree}]
                before = cpu_seconds(browser_tree), cpu_seconds(app_tree)
                page.wait_for_timeout(seconds * 1000)  # playwright keeps serving the page meanwhile
                after = cpu_seconds(browser_tree), cpu_seconds(app_tree)
                results[name] = {"browser": round(after[0] - before[0], 2), "app": round(after[1] - before[1], 2)}
            browser.close()
    finally:
        app.stop()
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workspace", type=Path, required=True)
    parser.add_argument("--baseline-rev", default=None, help="a revision to compare with (a git worktree of it)")
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--reps", type=int, default=2)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    checkouts = {"checkout": REPO}
    worktree = None
    if args.baseline_rev:
        worktree = Path(tempfile.mkdtemp(prefix="page-cpu-baseline-"))
        subprocess.run(["git", "-C", str(REPO), "worktree", "add", "--detach", str(worktree), args.baseline_rev],
                       check=True, capture_output=True)
        checkouts = {f"baseline {args.baseline_rev}": worktree, **checkouts}
    samples: dict[str, list[dict]] = {label: [] for label in checkouts}
    try:
        for _rep in range(args.reps):
            for label, checkout in checkouts.items():
                samples[label].append(measure(checkout, args.workspace, args.seconds))
    finally:
        if worktree is not None:
            subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force", str(worktree)], check=False)
    print(f"CPU-seconds over {args.seconds:.0f} s on each tab, median of {args.reps}, "
          f"{os.cpu_count()} CPUs ({time.strftime('%Y-%m-%d')}); browser / app")
    print("| tab | " + " | ".join(checkouts) + " |")
    print("|---|" + "---:|" * len(checkouts))
    medians = {label: {tab: {part: statistics.median(s[tab][part] for s in runs) for part in ("browser", "app")}
                       for tab in TABS} for label, runs in samples.items()}
    for tab in TABS:
        cells = [f"{m[tab]['browser']:.2f} / {m[tab]['app']:.2f}" for m in medians.values()]
        print(f"| {tab} | " + " | ".join(cells) + " |")
    if args.out:
        args.out.write_text(json.dumps({"seconds": args.seconds, "medians": medians, "samples": samples}, indent=1))


if __name__ == "__main__":
    main()
