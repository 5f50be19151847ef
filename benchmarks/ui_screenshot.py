"""Screenshots for docs/: ``kvledger ui`` after computing the serving panel, and the top of a ``kvledger report``.

Starts the web app on a free loopback port, drives Debian's headless chromium with selenium, and
writes docs/ui.png and docs/report.png. Run: ``python benchmarks/ui_screenshot.py``.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _driver(height: int):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = "/usr/bin/chromium"
    for a in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
              f"--window-size=1400,{height}"):
        opts.add_argument(a)
    return webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=opts)


def _wait(drv, above: int, timeout_s: float = 180.0) -> None:
    from selenium.webdriver.support.ui import WebDriverWait

    WebDriverWait(drv, timeout_s).until(lambda b: int(b.find_element("id",
                                                                     "status").get_attribute("data-version")) > above)


def ui_shot(out: Path) -> None:
    import uvicorn

    from kvledger.report.webapp import create_app

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    srv = uvicorn.Server(uvicorn.Config(create_app(), host="127.0.0.1", port=port, log_level="warning"))
    threading.Thread(target=srv.run, daemon=True).start()
    while not srv.started:
        time.sleep(0.05)
    drv = _driver(1500)
    try:
        drv.get(f"http://127.0.0.1:{port}/")
        _wait(drv, 0)
        drv.find_element("id", "run-serving").click()
        _wait(drv, 1)
        drv.save_screenshot(str(out))
    finally:
        drv.quit()
        srv.should_exit = True


def report_shot(out: Path) -> None:
    with tempfile.TemporaryDirectory() as d:
        html = Path(d) / "r.html"
        subprocess.run([sys.executable, "-m", "kvledger.cli.main", "report", "meta-llama/Llama-3.1-8B", "--gpu", "H100",
                        "--trace",
                        "azure-conv", "--slo", "ttft=200ms,tpot=50ms", "--api", "OpenAI:gpt-4.1", "--out", str(html)],
                            check=True)
        drv = _driver(1300)
        try:
            drv.get(html.as_uri())
            time.sleep(1)
            drv.save_screenshot(str(out))
        finally:
            drv.quit()


if __name__ == "__main__":
    docs = ROOT / "docs"
    docs.mkdir(exist_ok=True)
    ui_shot(docs / "ui.png")
    report_shot(docs / "report.png")
    print(f"wrote {docs / 'ui.png'} and {docs / 'report.png'}")
