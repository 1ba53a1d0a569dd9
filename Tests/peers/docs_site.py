"""The documentation site (scripts/docs, issue 36) in real headless Chromium.

Usage: docs_site.py --site DIR --modules A,B,... [--articles N] [--chromium PATH] [--chromedriver PATH]

Serves DIR (what scripts/docs built) with Python's http.server on loopback and opens, in
Chromium, the index, every module's landing page and every article: each must render (DocC's
pages build themselves with JavaScript from JSON) with its title, a landing page with its
summary. Then
the symbol page of `Reconnector.manualStart(immediately:)` must show its doc comment. Prints one
line per check and `docs site: N checks passed`; exits 1 on the first failure.
"""

import argparse
import functools
import shutil
import sys
import tempfile
import threading
import time
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

from selenium import webdriver
from selenium.webdriver.common.by import By


class QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, format, *args):
        pass


def make_driver(args, user_data_dir):
    options = webdriver.ChromeOptions()
    options.binary_location = args.chromium
    for flag in ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                 "--no-first-run", "--no-default-browser-check", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--disable-extensions",
                 "--window-size=1200,900", f"--user-data-dir={user_data_dir}",
                 # Nothing leaves loopback.
                 "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1"]:
        options.add_argument(flag)
    service = webdriver.ChromeService(executable_path=args.chromedriver)
    driver = webdriver.Chrome(options=options, service=service)
    driver.set_page_load_timeout(20)
    return driver


def wait_for_text(driver, selector, predicate, timeout=15):
    """The text of the first element matching `selector` once `predicate` holds for it."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        for element in driver.find_elements(By.CSS_SELECTOR, selector):
            text = element.text.strip()
            last = text
            if predicate(text):
                return text
        time.sleep(0.1)
    raise AssertionError(f"{selector}: {last!r} after {timeout} s")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--site", required=True)
    parser.add_argument("--modules", required=True)
    parser.add_argument("--articles", type=int, default=0, help="the fewest articles the index must list")
    parser.add_argument("--chromium", default="/usr/bin/chromium")
    parser.add_argument("--chromedriver", default="/usr/bin/chromedriver")
    args = parser.parse_args()
    modules = [name for name in args.modules.split(",") if name]

    server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(QuietHandler, directory=args.site))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}"
    user_data_dir = tempfile.mkdtemp(prefix="docs-site-")
    driver = make_driver(args, user_data_dir)
    checks = 0
    try:
        driver.get(f"{base}/index.html")
        links = [element.text for element in driver.find_elements(By.CSS_SELECTOR, "li:not(.article) a")]
        assert links == modules, f"the index lists {links}"
        # Each product's summary as the index gives it (its catalog's first paragraph).
        summaries = {element.find_element(By.CSS_SELECTOR, "a").text: element.text.split(": ", 1)[1]
                     for element in driver.find_elements(By.CSS_SELECTOR, "li:not(.article)")}
        articles = [(element.text, element.get_attribute("href"))
                    for element in driver.find_elements(By.CSS_SELECTOR, "li.article a")]
        assert len(articles) >= args.articles, f"the index lists {len(articles)} articles: {articles}"
        checks += 1
        print(f"index: {len(links)} products listed")
        for module in modules:
            lower = module.lower()
            driver.get(f"{base}/{lower}/documentation/{lower}/")
            title = wait_for_text(driver, "h1", lambda text: text == module)
            # DocC renders ' as ’: compared without either.
            expected = summaries[module][:50].replace("'", "")
            wait_for_text(driver, "main", lambda text: expected in text.replace("\u2019", ""))
            checks += 1
            print(f"{module}: title {title!r}, summary {expected!r}…")
        for title, url in articles:
            driver.get(url)
            wait_for_text(driver, "h1", lambda text: text == title)
            wait_for_text(driver, "main", lambda text: len(text) > 400)
            checks += 1
            print(f"article {title!r}: rendered")
        driver.get(f"{base}/reconnect/documentation/reconnect/reconnector/manualstart(immediately:)")
        wait_for_text(driver, "h1", lambda text: text.startswith("manualStart"))
        # Its summary, its discussion and its parameter (DocC capitalizes a parameter's text).
        wait_for_text(driver, "main", lambda text: "Acts as if an accidental disconnect just happened" in text
                      and "keep trying when there is no network at launch" in text
                      and "attempt now instead of after reconnectdelay" in text.lower())
        checks += 1
        print("Reconnector.manualStart(immediately:): its doc comment and parameter shown")
    except Exception as error:  # noqa: BLE001 - any failure is the test's failure
        print(f"FAILED: {error}", file=sys.stderr)
        return 1
    finally:
        driver.quit()
        server.shutdown()
        shutil.rmtree(user_data_dir, ignore_errors=True)
    print(f"docs site: {checks} checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
