"""The browser client's demo page (Samples/browser-demo) driven in real headless Chromium (issue 32).

Usage: browser_demo.py --demo PATH [--chromium PATH] [--chromedriver PATH] [--screenshot PATH]

Starts `browser-demo --port 0 --realtime-port 0`, opens its page, waits for the room's events,
clicks "Drop the connection" and then "Restart the server", and checks what the page shows after
each: the connection back to `connected`, the three events published while it was away shown
with a `replayed` badge, every event once and in order. Takes the screenshot the client's README
shows. Prints one line per check (`ok NAME detail` or `FAIL NAME detail`), then one JSON line
{"passed", "failed", …}; exits 0 only when every check passed. Bounded: a hard stop at 60 s.
"""
import argparse
import json
import os
import sys
import tempfile
import shutil
import time

from selenium import webdriver
from selenium.webdriver.common.by import By

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from browser_client import Child, Clock, Results, drive, expect, run_check  # noqa: E402

HARD_STOP = 60


class Run:
    def __init__(self, args, results):
        self.args, self.results, self.clock = args, results, Clock()
        self.demo = self.driver = None
        self.temp = tempfile.mkdtemp(prefix="browser-demo-")
        self.profile = os.path.join(self.temp, "profile")

    def setup(self):
        self.demo = Child("browser-demo", [self.args.demo, "--port", "0", "--realtime-port", "0"],
                          os.path.join(self.temp, "demo.log"), ready=rb"page (http://\S+)")
        self.demo.url = self.demo.start()
        options = webdriver.ChromeOptions()
        options.binary_location = self.args.chromium
        for flag in ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
                     "--disable-background-networking", "--disable-extensions", "--window-size=900,620",
                     f"--user-data-dir={self.profile}",
                     "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1"]:  # nothing leaves loopback
            options.add_argument(flag)
        self.driver = webdriver.Chrome(options=options, service=webdriver.ChromeService(executable_path=self.args.chromedriver))
        self.driver.set_page_load_timeout(15)
        self.driver.get(self.demo.url)

    def teardown(self):
        if self.driver:
            self.driver.quit()
        if self.demo:
            self.demo.stop()
        shutil.rmtree(self.temp, ignore_errors=True)

    def page(self):
        return self.driver.execute_script("return window.demo ? JSON.parse(JSON.stringify(window.demo)) : null")

    def wait(self, predicate, timeout, what):
        """Polls the page's `window.demo` until `predicate` holds on it; returns it (TimeoutError after `timeout`)."""
        return self.clock.wait(lambda: (lambda d: d if d and predicate(d) else None)(self.page()), timeout, what, interval=0.05)

    def check_in_order(self, demo):
        ids = [event["id"] for event in demo["events"]]
        ns = [event["n"] for event in demo["events"]]
        expect(ids == list(range(ids[0], ids[0] + len(ids))), f"ids not consecutive: {ids}")
        expect(ns == list(range(ns[0], ns[0] + len(ns))), f"numbers not consecutive: {ns}")
        expect(demo["duplicates"] == 0 and demo["outOfOrder"] == 0, f"{demo['duplicates']} twice, {demo['outOfOrder']} out of order")
        shown = self.driver.find_element(By.ID, "tally").text
        expect(f"{demo['duplicates']} twice, {demo['outOfOrder']} out of order" in shown, f"the page shows {shown!r}")

    def check_live(self):
        demo = self.wait(lambda d: len(d["events"]) >= 3 and d["states"] and d["states"][-1]["current"] == "connected", 10,
                         "connected with 3 events")
        self.check_in_order(demo)
        expect(demo["replayed"] == 0, f"{demo['replayed']} replayed before any drop")
        state = self.driver.find_element(By.ID, "state").text
        expect(state == "connected", f"the page shows {state!r}")
        return f"connected; {len(demo['events'])} live events, none replayed"

    def after(self, button, what):
        before = self.page()
        states_before, replayed_before = len(before["states"]), before["replayed"]
        self.driver.find_element(By.ID, button).click()
        demo = self.wait(lambda d: d["replayed"] >= replayed_before + 3 and d["states"][-1]["current"] == "connected", 25,
                         f"3 replayed events and connected after {what}")
        passed = [s["current"] for s in demo["states"][states_before:]]
        expect(passed[0] in ("unavailable", "connecting") and passed[-1] == "connected", f"states after {what}: {passed}")
        self.check_in_order(demo)
        # The 3 the button's route published, and any tick of the 500 ms timer while the page was away:
        # one run of consecutive events, each before every live one after it.
        replayed = [index for index, event in enumerate(demo["events"]) if event["replayed"]][replayed_before:]
        expect(len(replayed) >= 3 and replayed == list(range(replayed[0], replayed[0] + len(replayed))),
               f"replayed after {what} at {replayed}, expected at least the 3 published while away, in one run")
        badges = len(self.driver.find_elements(By.CSS_SELECTOR, "#events .badge"))
        expect(badges == demo["replayed"], f"{badges} badges on the page for {demo['replayed']} replayed events")
        note = self.driver.find_element(By.ID, "note").text
        expect(note == "", f"the page shows an error: {note!r}")
        return demo, passed

    def check_drop(self):
        demo, passed = self.after("drop", "the drop")
        return f"{' -> '.join(passed)}; {demo['replayed']} events replayed with badges, {len(demo['events'])} in order, none twice"

    def check_restart(self):
        demo, passed = self.after("restart", "the restart")
        live = len(demo["events"])
        demo = self.wait(lambda d: len(d["events"]) >= live + 2, 5, "live events after the restart")
        self.check_in_order(demo)
        if self.args.screenshot:
            self.driver.save_screenshot(self.args.screenshot)
        return f"{' -> '.join(passed)}; {demo['replayed']} replayed in all with badges, then live again; {len(demo['events'])} in order, none twice"

    def run(self):
        if run_check(self.results, "demo_live_events", self.check_live):
            if run_check(self.results, "demo_drop_replayed", self.check_drop):
                run_check(self.results, "demo_restart_replayed", self.check_restart)
                return
        self.results.fail("demo_buttons", "skipped: an earlier check failed")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--demo", required=True)
    parser.add_argument("--chromium", default="/usr/bin/chromium")
    parser.add_argument("--chromedriver", default="/usr/bin/chromedriver")
    parser.add_argument("--screenshot")
    parser.add_argument("--verbose", action="store_true")
    args = parser.parse_args()

    results = Results(args.verbose)
    run = Run(args, results)
    drive(run, results, HARD_STOP)
    print(json.dumps({"passed": results.passed, "failed": results.failed,
                      "seconds": round(time.monotonic() - results.started, 1)}), flush=True)
    return 0 if results.failed == 0 and results.passed > 0 else 1


if __name__ == "__main__":
    sys.exit(main())
