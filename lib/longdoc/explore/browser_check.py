"""The explorer checked as a user meets it: JupyterLab started headless, ``notebooks/explore.ipynb``
opened in headless Chromium (Selenium with Debian's ``chromium`` and ``chromium-driver``), every cell
run, a query typed, **Rank** pressed, the ranking asserted, and a screenshot saved.

    apt-get install chromium chromium-driver && .venv/bin/pip install -r requirements-browser.txt
    .venv/bin/python -m longdoc.explore.browser_check --screenshot figures/explorer.png

It asserts that each system's column shows, document for document, what the explorer's searchers
return for the typed query. About a minute on two cores once the smoke notebooks have filled the cache;
it needs Chromium, which the CI machine does not have, so it is a documented script rather than a CI
step. It exits non-zero naming the step that failed, with a screenshot of the page at that moment.
"""

from __future__ import annotations

import argparse
import os
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from longdoc.data.registry import REPO_ROOT

NOTEBOOK = REPO_ROOT / "notebooks" / "explore.ipynb"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def start_lab(port: int, token: str, log: Path, root: Path) -> subprocess.Popen:
    """JupyterLab on ``port`` serving ``root`` (a scratch copy of the notebook), no browser, a fresh token."""
    command = [
        sys.executable,
        "-m",
        "jupyterlab",
        "--no-browser",
        f"--port={port}",
        "--ip=127.0.0.1",
        f"--IdentityProvider.token={token}",
        f"--ServerApp.root_dir={root}",
        "--allow-root",
    ]
    return subprocess.Popen(command, stdout=log.open("w"), stderr=subprocess.STDOUT, env=os.environ.copy())


def wait_for_lab(port: int, timeout: float) -> None:
    import urllib.request

    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/api", timeout=2)
            return
        except OSError:
            time.sleep(1)
    raise TimeoutError(f"JupyterLab did not answer on port {port} within {timeout:.0f} s")


def browser(chromium: str, driver: str):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for flag in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1920,1250"):
        options.add_argument(flag)
    return webdriver.Chrome(service=Service(driver), options=options)


def check(query: str, screenshot: Path, timeout: float, chromium: str, driver: str, profile: str = "smoke") -> dict:
    """Run the whole check; returns what it saw (systems ranked, rows, seconds per step). The rankings
    shown must be, document for document, what the explorer's own searchers return in this process."""
    from longdoc.explore.widgets import Explorer

    reference = Explorer(profile)
    query = query or next(iter(reference.test_queries.values()))  # the first test query: its marks show
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support import expected_conditions as seen
    from selenium.webdriver.support.ui import WebDriverWait

    port, token = free_port(), secrets.token_hex(16)
    scratch = Path(tempfile.mkdtemp(prefix="longdoc-browser-check-"))
    shutil.copy(NOTEBOOK, scratch / NOTEBOOK.name)  # JupyterLab autosaves: never into the tracked notebook
    log = scratch / "lab.log"
    lab = start_lab(port, token, log, scratch)
    steps: dict[str, float] = {}
    started = time.time()
    web = None
    try:
        wait_for_lab(port, 120)
        steps["lab started"] = time.time() - started
        web = browser(chromium, driver)
        wait = WebDriverWait(web, timeout)
        web.get(f"http://127.0.0.1:{port}/lab/tree/{NOTEBOOK.name}?token={token}")
        wait.until(seen.presence_of_element_located((By.CSS_SELECTOR, ".jp-Notebook")))
        time.sleep(3)  # the kernel attaches
        steps["notebook open"] = time.time() - started
        web.find_element(By.XPATH, "//div[contains(@class,'lm-MenuBar-itemLabel') and text()='Run']").click()
        run_all = "//div[contains(@class,'lm-Menu-itemLabel') and text()='Run All Cells']"
        wait.until(seen.element_to_be_clickable((By.XPATH, run_all))).click()
        box = wait.until(seen.presence_of_element_located((By.CSS_SELECTOR, ".longdoc-query input")))
        steps["explorer shown"] = time.time() - started
        # the last cell's ranking: every cell has run and the kernel is idle (a busy kernel would get the
        # Rank click before the typed text, which the front end holds back while it is busy)
        wait.until(lambda w: w.find_elements(By.CSS_SELECTOR, ".jp-OutputArea-output .longdoc-query-shown"))
        steps["all cells run"] = time.time() - started
        for dismiss in web.find_elements(By.XPATH, "//button[.//text()='No']"):  # JupyterLab's news prompt
            dismiss.click()
        box.click()
        box.send_keys(query, Keys.TAB)
        time.sleep(2)  # the text box syncs to the kernel asynchronously: let it arrive before Rank reads it
        web.find_element(By.CSS_SELECTOR, ".longdoc-rank").click()
        wait.until(lambda w: w.find_elements(By.CSS_SELECTOR, ".longdoc-ranking .longdoc-system"))
        systems = web.find_elements(By.CSS_SELECTOR, ".longdoc-ranking .longdoc-system")
        rows = web.find_elements(By.CSS_SELECTOR, ".longdoc-ranking .longdoc-hit")
        shown = web.find_element(By.CSS_SELECTOR, ".longdoc-ranking .longdoc-query-shown").text
        steps["ranked"] = time.time() - started
        if query not in shown or not rows:
            raise AssertionError(
                f"the ranking does not show the query {query!r} with hits (saw {shown!r}, {len(rows)} rows)"
            )
        for tab in web.find_elements(By.CSS_SELECTOR, "li.lm-TabBar-tab[data-id='filebrowser'].lm-mod-current"):
            tab.click()  # fold the file browser: room for the columns
        time.sleep(1)
        web.execute_script("arguments[0].scrollIntoView();", web.find_element(By.CSS_SELECTOR, ".longdoc-systems"))
        screenshot.parent.mkdir(parents=True, exist_ok=True)
        web.save_screenshot(str(screenshot))
        columns = {
            s.find_element(By.TAG_NAME, "h4").text: [
                cell.get_attribute("title") for cell in s.find_elements(By.CSS_SELECTOR, ".longdoc-hit td[title]")
            ]
            for s in systems
        }
        for name, documents in columns.items():
            expected = [doc for doc, _ in reference.searcher(name).search(query, reference.k)]
            if documents != expected:
                raise AssertionError(f"{name}: the page shows {documents}, its searcher ranks {expected}")
        steps["rankings compared"] = time.time() - started
        return {
            "systems": list(columns),
            "rows": len(rows),
            "query": query,
            "seconds": {k: round(v, 1) for k, v in steps.items()},
            "screenshot": str(screenshot),
        }
    except Exception as err:
        if web is not None:
            failed = screenshot.with_name(screenshot.stem + ".failed.png")
            failed.parent.mkdir(parents=True, exist_ok=True)
            web.save_screenshot(str(failed))
        reached = ", ".join(steps) or "nothing"
        raise RuntimeError(
            f"{type(err).__name__} after: {reached} (JupyterLab log: {log}; screen: {screenshot.stem}.failed.png)"
        ) from err
    finally:
        if web is not None:
            web.quit()
        lab.terminate()
        lab.wait(timeout=30)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m longdoc.explore.browser_check", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--query", default="", help="the text to type (default: the first test query's)")
    parser.add_argument("--screenshot", type=Path, default=REPO_ROOT / "figures" / "explorer.png")
    parser.add_argument("--timeout", type=float, default=600, help="seconds to wait for each step")
    parser.add_argument("--profile", default="smoke", help="the profile the notebook's explorer reads (its default)")
    parser.add_argument("--chromium", default="/usr/bin/chromium")
    parser.add_argument("--driver", default="/usr/bin/chromedriver")
    args = parser.parse_args(argv)
    for tool in (args.chromium, args.driver):
        if not Path(tool).exists():
            print(f"browser_check: {tool} missing (apt-get install chromium chromium-driver)", file=sys.stderr)
            return 2
    try:
        seen = check(args.query, args.screenshot, args.timeout, args.chromium, args.driver, args.profile)
    except Exception as err:  # the step that failed, for the person running it
        print(f"browser_check: FAILED: {err}", file=sys.stderr)
        return 1
    print(f"browser_check: passed: {seen}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
