"""One headless Chromium session per test process (Debian's chromium + chromium-driver, driven by selenium): the
report's and the ui's browser tests share it, each test loading its own page (a browser start is a second or two)."""

from __future__ import annotations

import shutil

import pytest


def _paths() -> tuple[str | None, str | None]:
    return shutil.which("chromium") or shutil.which("chromium-browser"), shutil.which("chromedriver")


@pytest.fixture(scope="session")
def browser():
    chromium, driver = _paths()
    if chromium is None or driver is None:
        pytest.skip("needs Debian's chromium and chromium-driver (apt-get install -y chromium chromium-driver; .ci/run "
                    "installs them)")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = chromium
    for a in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu", "--window-size=1400,1000"):
        opts.add_argument(a)
    drv = webdriver.Chrome(service=Service(executable_path=driver), options=opts)
    yield drv
    drv.quit()
