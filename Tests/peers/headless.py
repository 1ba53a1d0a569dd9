"""Headless Chromium for the tests' pages: the one set of flags they share.

`driver(chromium, chromedriver, prefix)` starts Chromium through chromedriver (selenium) with a
fresh profile under the temporary folder, no background network, no throttled timers, and every
host name but 127.0.0.1 resolving to nothing: loopback only.
"""

import tempfile

from selenium import webdriver

FLAGS = ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync", "--disable-extensions",
         "--disable-background-timer-throttling", "--disable-renderer-backgrounding",
         "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1"]


def driver(chromium, chromedriver, prefix, profile=None):
    """A selenium driver on a new headless Chromium (its console kept: `get_log("browser")`).

    Args:
        chromium: the browser's binary.
        chromedriver: the driver's binary.
        prefix: the profile folder's name prefix (under the temporary folder), unless `profile` is given.
        profile: the profile folder to use.
    """
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for flag in FLAGS + [f"--user-data-dir={profile or tempfile.mkdtemp(prefix=prefix)}"]:
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(options=options, service=webdriver.ChromeService(executable_path=chromedriver))
