"""The console as a keyboard and a screen reader meet it, and at the widths operators use: every menu entry is a link
that Tab reaches and Enter opens, the page shown is marked current (also after back, forward and reload), and every
column of the Live log stays reachable with the record panel open."""

from __future__ import annotations

import uuid

import pytest
from openai import OpenAI
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


def last_header_cell(page, scroll: bool) -> dict:
    """Where the log table's last header cell is (after scrolling it into view if ``scroll``), and whether it is
    what a pointer at its centre would meet."""
    return page.evaluate("""(scroll) => {
        const cell = document.querySelector(".log-table thead th:last-child");
        const wrap = cell.closest(".table-wrap");
        if (scroll) cell.scrollIntoView({ block: "nearest", inline: "nearest" });
        const box = cell.getBoundingClientRect(), area = wrap.getBoundingClientRect();
        const top = document.elementFromPoint(box.left + box.width / 2, box.top + box.height / 2);
        return { text: cell.textContent, onTop: top === cell || cell.contains(top),
                 inArea: box.left >= area.left - 1 && box.right <= area.right + 1,
                 fits: wrap.scrollWidth <= wrap.clientWidth, page: document.documentElement.scrollWidth };
    }""", scroll)


@pytest.mark.parametrize("width", [1400, 640])
def test_every_log_column_is_reachable_with_the_record_panel_open(page, console_gateway, mock, width):
    page.set_viewport_size({"width": width, "height": 900})
    enter_key(page, console_gateway)
    expect(page.locator("#live-state")).to_have_text("live")
    trace = f"console-{uuid.uuid4().hex}"
    OpenAI(base_url=f"{console_gateway.url}/v1", api_key="sk-provider-token", max_retries=0, timeout=30,
           default_headers={"x-gateway-api-key": ADMIN_KEY, "x-gateway-provider": "vendorA",
                            "x-gateway-custom-host": f"{mock.scenario()}/v1", "x-gateway-trace-id": trace},
           ).chat.completions.create(model="gpt-4o-mini-2024-07-18", messages=[{"role": "user", "content": "hi"}])
    row = page.locator(f'#log-rows tr[data-trace="{trace}"]')
    row.click()
    expect(page.locator("#log-detail")).to_contain_text(trace)
    before = last_header_cell(page, scroll=False)
    assert before["text"] == "Trace id"
    if width >= 1400:  # every column in sight beside the panel, no scrolling
        assert before["fits"] and before["onTop"] and before["inArea"], before
    else:  # the table scrolls sideways in its own box (the keyboard scrolls it too); the page does not
        assert not before["fits"], before
        box = page.get_by_role("region", name="Requests")
        box.focus()
        for _ in range(3):
            page.keyboard.press("ArrowRight")
        page.wait_for_function("e => e.scrollLeft > 0", arg=box.element_handle(), timeout=5000)
    after = last_header_cell(page, scroll=True)
    assert after["onTop"], f"the record panel (or something else) covers the last column: {after}"
    assert after["inArea"], after
    assert after["page"] <= width, f"the page itself scrolls sideways: {after}"
    cell = row.locator("td.trace")  # the trace id of the row opened is reachable the same way
    cell.scroll_into_view_if_needed()
    box = cell.bounding_box()
    assert box is not None
    hit = page.evaluate("([x, y]) => document.elementFromPoint(x, y).closest('td')?.className ?? ''",
                        [box["x"] + box["width"] / 2, box["y"] + box["height"] / 2])
    assert hit == "trace", (hit, box)
