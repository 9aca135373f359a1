"""Headless Chromium for the tests that look at pages (the rendered book, the serve chat page):
Debian's chromium and chromium-driver (CI installs them: .ci/run); skipped where either is missing."""
import shutil

import pytest

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
DRIVER = shutil.which("chromedriver")


def chromium(window: str = "1280,1024"):
    "A generator for a pytest fixture: one headless Chromium driver, quit at the end."
    if not (CHROMIUM and DRIVER):
        pytest.skip("needs Chromium and ChromeDriver (Debian: apt-get install chromium chromium-driver)")
    webdriver = pytest.importorskip("selenium.webdriver")
    from selenium.webdriver.chrome.service import Service
    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                f"--window-size={window}"):
        opts.add_argument(arg)
    drv = webdriver.Chrome(service=Service(DRIVER), options=opts)
    drv.set_page_load_timeout(60)
    yield drv
    drv.quit()
