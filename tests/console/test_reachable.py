"""The console as a keyboard and a screen reader meet it: every menu entry is a link that Tab reaches and Enter opens,
and the page shown is marked current (also after back, forward and reload)."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.support.servers import ADMIN_KEY

# id, menu title, an element only that page shows
PAGES = [("logs", "Live log", "#log-filters"), ("glance", "At a glance", "#glance-cards"),
         ("playground", "Config playground", "#config-editor")]
MAX_TABS = 20  # the menu comes right after the heading: a few presses reach any entry


def enter_key(page, gateway, where: str = "") -> None:
    page.goto(f"{gateway.url}/console{where}")
    page.fill("#key-input", ADMIN_KEY)
    page.click("#key-use")
    expect(page.locator("#key-state")).to_have_text("key accepted")


def menu(page):
    return page.get_by_role("navigation", name="Pages")


def expect_on(page, page_id: str, address: str | None = None) -> None:
    """The page shown, the address (``#/page_id`` unless told) and the menu's current entry agree on ``page_id``."""
    title, marker = next((t, m) for i, t, m in PAGES if i == page_id)
    expect(page.locator(marker)).to_be_visible()
    assert page.evaluate("location.hash") == (f"#/{page_id}" if address is None else address)
    expect(menu(page).get_by_role("link", name=title)).to_have_attribute("aria-current", "page")
    for _, other, _ in PAGES:
        if other != title:
            expect(menu(page).get_by_role("link", name=other)).not_to_have_attribute("aria-current", "page")


def test_a_screen_reader_finds_every_menu_entry_as_a_link_and_the_current_page(page, console_gateway):
    enter_key(page, console_gateway)
    expect(menu(page)).to_match_aria_snapshot(
        '- navigation "Pages":\n'
        '  - link "Live log":\n    - /url: "#/logs"\n'
        '  - link "At a glance":\n    - /url: "#/glance"\n'
        '  - link "Config playground":\n    - /url: "#/playground"\n')
    expect(menu(page).get_by_role("link", name="Live log")).to_have_attribute("aria-current", "page")
    for page_id, title, _ in PAGES:
        menu(page).get_by_role("link", name=title).click()
        expect_on(page, page_id)


@pytest.mark.parametrize("page_id,title,marker", PAGES)
def test_tab_reaches_each_menu_link_and_enter_opens_its_page(page, console_gateway, page_id, title, marker):
    start = "playground" if page_id != "playground" else "logs"
    enter_key(page, console_gateway, where=f"#/{start}")
    page.reload()  # the key is kept; focus starts at the top of the document, as for a reader arriving here
    expect_on(page, start)
    link = menu(page).get_by_role("link", name=title)
    for _ in range(MAX_TABS):
        page.keyboard.press("Tab")
        if link.evaluate("a => a === document.activeElement"):
            break
    else:
        pytest.fail(f"{MAX_TABS} presses of Tab did not reach the {title!r} link")
    page.keyboard.press("Enter")
    expect_on(page, page_id)
    assert link.evaluate("a => a === document.activeElement"), "focus left the link just used"


def test_back_forward_and_reload_keep_the_page(page, console_gateway):
    enter_key(page, console_gateway)
    expect_on(page, "logs", address="")  # no address: the first page
    for page_id, title, _ in PAGES[1:]:
        menu(page).get_by_role("link", name=title).click()
        expect_on(page, page_id)
    page.go_back()
    expect_on(page, "glance")
    page.go_back()
    expect_on(page, "logs", address="")
    page.go_forward()
    expect_on(page, "glance")
    page.reload()
    expect_on(page, "glance")

