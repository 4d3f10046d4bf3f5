"""Browser fixtures: Debian's Chromium (``/usr/bin/chromium``) driven by Playwright, against the real gateway and
mock. A missing browser fails the tests (``.ci/run`` installs it); every test saves a screenshot under
``test-output/console/``, printed at the end of the run."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from tests.support.servers import start_gateway

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]
SCREENSHOTS = Path(__file__).resolve().parents[2] / "test-output" / "console"
#: screenshots older than this run are not counted (xdist workers take them; the controller prints the summary)
STARTED = time.time() - 1


@pytest.fixture(scope="module")
def console_gateway(mock_server):
    """A gateway that logs bodies, so a prompt is part of the record the console opens."""
    server = start_gateway({"GATEWAY_LOG_BODIES": "1"})
    yield server
    server.stop()


@pytest.fixture(scope="module")
def browser():
    """One Chromium per test module, closed before the next module: Playwright's sync API keeps its own event loop
    running while it is open, which the asyncio tests elsewhere in the session must not meet."""
    if not os.access(CHROMIUM, os.X_OK):
        pytest.fail(f"{CHROMIUM} is missing: apt-get install -y chromium chromium-driver (.ci/run does it)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        yield chromium
        chromium.close()


class PageProblems:
    """What a page did that it must not: script errors, CSP violations, dialogs (an injected alert)."""

    def __init__(self) -> None:
        self.errors: list[str] = []
        self.dialogs: list[str] = []


@pytest.fixture
def page(browser, request):
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    tab = context.new_page()
    problems = PageProblems()
    tab.on("pageerror", lambda error: problems.errors.append(f"page error: {error}"))
    tab.on("console", lambda message: problems.errors.append(f"console: {message.text}")
           if message.type == "error" and "Content Security Policy" in message.text else None)

    def on_dialog(dialog) -> None:
        problems.dialogs.append(dialog.message)
        dialog.dismiss()

    tab.on("dialog", on_dialog)
    tab.problems = problems
    yield tab
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    shot = SCREENSHOTS / f"{request.node.name}.png"
    tab.screenshot(path=str(shot), full_page=True)
    context.close()
    assert problems.errors == [] and problems.dialogs == [], (problems.errors, problems.dialogs)


def pytest_terminal_summary(terminalreporter) -> None:
    taken = [shot for shot in SCREENSHOTS.glob("*.png") if shot.stat().st_mtime >= STARTED] \
        if SCREENSHOTS.is_dir() else []
    if taken:
        terminalreporter.write_line(f"console screenshots ({len(taken)}): {SCREENSHOTS}")
