"""A page in real headless Chromium, watched: prints the text of one element each time it changes.

Usage: page_watch.py URL SELECTOR [--chromium PATH] [--chromedriver PATH]

Prints `text TEXT` (JSON-quoted) for the element's first text and every change after it (polled
every 50 ms), and `console LEVEL MESSAGE` for the page's console errors, one line each, flushed.
Runs until SIGTERM; bounded: it ends after 300 s whatever happens. Loopback
only: every other host name resolves to nothing.
"""

import argparse
import json
import signal
import threading
import time

import headless
from selenium.common.exceptions import WebDriverException

LIMIT = 300  # seconds


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("url")
    parser.add_argument("selector")
    parser.add_argument("--chromium", default="/usr/bin/chromium")
    parser.add_argument("--chromedriver", default="/usr/bin/chromedriver")
    args = parser.parse_args()

    stopping = threading.Event()

    def stop(signum, frame):
        stopping.set()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGALRM, stop)
    signal.alarm(LIMIT)

    driver = headless.driver(args.chromium, args.chromedriver, "page-watch-")
    try:
        driver.set_page_load_timeout(15)
        driver.get(args.url)
        last = None
        while not stopping.is_set():
            try:
                text = driver.execute_script("const e = document.querySelector(arguments[0]); return e ? e.textContent : null", args.selector)
                for entry in driver.get_log("browser"):
                    if entry.get("level") in ("SEVERE", "WARNING"):
                        print(f"console {entry.get('level')} {json.dumps(entry.get('message'))}", flush=True)
            except WebDriverException as error:
                print(f"console DRIVER {json.dumps(str(error)[:300])}", flush=True)
                break
            if text is not None and text != last:
                print(f"text {json.dumps(text)}", flush=True)
                last = text
            time.sleep(0.05)
    finally:
        driver.quit()


if __name__ == "__main__":
    main()
