"""The operator's console in headless Chromium, driven line by line by a Swift test.

Usage: console_page.py --url http://127.0.0.1:PORT --token TOKEN --screenshot PATH
                       [--chromium PATH] [--chromedriver PATH]

Logs in through the console's form, then reads commands on stdin, one a line, and answers on
stdout (one line each, flushed):

  ready                                  the page is up, logged in, the first snapshot shown
  connection SOCKET_ID  -> seen-connection MS       the socket id is in the connections table
  room_event ROOM EVENT -> seen-room-event MS       a room_event entry of ROOM and EVENT is in the log
  publish CHANNEL EVENT DATA -> published TEXT      sent through the page's form; TEXT its result line
  screenshot            -> screenshot PATH          the page saved as PNG
  quit                  -> errors N                 the browser console's SEVERE entries, then exit

MS is the milliseconds from reading the command to seeing it on the page (polled every 20 ms,
at most 10 s: `timeout` otherwise).
"""

import argparse
import os
import sys
import time

from selenium.webdriver.common.by import By

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import headless  # noqa: E402


def say(line):
    print(line, flush=True)


def wait_for(predicate, seconds=10.0):
    """Milliseconds until `predicate()` is true, polled every 20 ms, or None after `seconds`."""
    start = time.monotonic()
    while time.monotonic() - start < seconds:
        try:
            if predicate():
                return int((time.monotonic() - start) * 1000)
        except Exception:  # the page is re-rendering an element: look again
            pass
        time.sleep(0.02)
    return None


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--url", required=True)
    parser.add_argument("--token", required=True)
    parser.add_argument("--screenshot", required=True)
    parser.add_argument("--chromium", default="/usr/bin/chromium")
    parser.add_argument("--chromedriver", default="/usr/bin/chromedriver")
    args = parser.parse_args()

    driver = headless.driver(args.chromium, args.chromedriver, "console-page-")
    try:
        driver.set_window_size(1280, 1000)
        driver.get(args.url + "/console")
        driver.find_element(By.NAME, "token").send_keys(args.token)
        driver.find_element(By.CSS_SELECTOR, "form button[type=submit]").click()
        if wait_for(lambda: driver.find_element(By.ID, "app-select").get_attribute("value")
                    and driver.find_element(By.ID, "connections-count").text.strip() != "") is None:
            say("timeout login: " + driver.page_source[:500].replace("\n", " "))
            return 1
        # What the login logged (the 401 of the first load, by design) is drained here: the
        # errors counted at `quit` are the console page's own.
        driver.get_log("browser")
        say("ready")
        for line in sys.stdin:
            words = line.split(" ", 3)
            command = words[0].strip()
            if command == "connection":
                socket_id = words[1].strip()
                took = wait_for(lambda: socket_id in driver.find_element(By.ID, "connections").text)
                say(f"seen-connection {took}" if took is not None else "timeout connection")
            elif command == "room_event":
                room, event = words[1].strip(), words[2].strip()

                def shown():
                    for entry in driver.find_elements(By.CSS_SELECTOR, "#log [data-kind=room_event]"):
                        if room in entry.text and event in entry.text:
                            return True
                    return False
                took = wait_for(shown)
                say(f"seen-room-event {took}" if took is not None else "timeout room_event")
            elif command == "publish":
                channel, event, data = words[1].strip(), words[2].strip(), words[3].strip()
                driver.find_element(By.ID, "publish-target-channel").click()
                for field, value in (("publish-name", channel), ("publish-event", event), ("publish-data", data)):
                    element = driver.find_element(By.ID, field)
                    element.clear()
                    element.send_keys(value)
                result = driver.find_element(By.ID, "publish-result")
                before = result.text
                driver.find_element(By.ID, "publish-send").click()
                took = wait_for(lambda: result.text.strip() != "" and result.text != before)
                say(f"published {result.text.strip()}" if took is not None else "timeout publish")
            elif command == "screenshot":
                # The top of the page, after a poll or two more (the form's event in the log).
                driver.execute_script("window.scrollTo(0, 0)")
                time.sleep(1.2)
                driver.save_screenshot(args.screenshot)
                say(f"screenshot {args.screenshot}")
            elif command == "quit":
                severe = [entry for entry in driver.get_log("browser") if entry.get("level") == "SEVERE"]
                for entry in severe:
                    print("browser: " + entry.get("message", ""), file=sys.stderr)
                say(f"errors {len(severe)}")
                return 0
            else:
                say(f"unknown {command}")
        return 0
    finally:
        driver.quit()


if __name__ == "__main__":
    sys.exit(main())
