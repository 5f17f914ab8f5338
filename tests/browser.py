"""Headless Chromium for the report's tests in a real browser (tests/unit/test_report.py and
test_report_layout.py): where the browser and its driver are, and one way to start them."""

from __future__ import annotations

import shutil
from pathlib import Path

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = "/usr/bin/chromedriver" if Path("/usr/bin/chromedriver").exists() else shutil.which("chromedriver")
MISSING = "chromium and chromedriver not installed (apt-get install -y chromium chromium-driver)"
# Rendering ~100 figures in one script call takes 30-60 s on a loaded 2-core host (measured with load
# average 20, and with the fast tests on two workers beside guests): selenium's default 30 s script
# timeout is not what these tests are about.
SCRIPT_TIMEOUT_S = 300


def headless_chromium(profile: Path, width: int, height: int, extra_args: tuple[str, ...] = (),
                      browser_log: bool = False):
    """A headless Chromium with a fresh profile in `profile`, its window `width` x `height`;
    `browser_log`: keep the page's console for the test to read."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for a in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
              "--disable-component-update", "--disable-sync", "--no-first-run", *extra_args,
              f"--user-data-dir={profile}", f"--window-size={width},{height}"):
        opts.add_argument(a)
    if browser_log:
        opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    drv = webdriver.Chrome(service=Service(CHROMEDRIVER), options=opts)
    drv.set_script_timeout(SCRIPT_TIMEOUT_S)
    return drv
