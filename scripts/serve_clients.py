"""Checks a running `transformer serve` (the tiny toy model) with real clients.

1. libretranslatepy, LibreTranslate's own Python client: translate() and languages().
2. The page at / in headless chromium (Playwright): type a sentence, click Translate, read
   the translation from the DOM, and check that the attention heatmap loaded as an image.
   A screenshot of the page is written to --screenshot.
"""

import argparse
import sys

from libretranslatepy import LibreTranslateAPI
from playwright.sync_api import sync_playwright

SENTENCE = "ich mochte ein bier"
WANT = "i want a beer ."
# Flags without which chromium keeps dialling Google's hosts on a closed network.
CHROMIUM_FLAGS = [
    "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]


def check(condition, message):
    if not condition:
        sys.exit(f"serve clients: {message}")


def check_libretranslatepy(url):
    client = LibreTranslateAPI(url)
    got = client.translate(SENTENCE, "de", "en")
    check(got == WANT, f"libretranslatepy translate() gave {got!r}, want {WANT!r}")
    languages = client.languages()
    codes = {entry["code"]: entry for entry in languages}
    check(codes.get("de", {}).get("targets") == ["en"], f"languages() gave {languages!r}")
    check(codes["de"]["name"] == "German", f"languages() named de {codes['de']['name']!r}")
    detected = client.detect(SENTENCE)
    check(detected[0]["language"] == "de", f"detect() gave {detected!r}")
    print(f"libretranslatepy: translate -> {got!r}, languages -> {sorted(codes)}")


def check_page(url, screenshot, chromium):
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium, args=CHROMIUM_FLAGS)
        try:
            page = browser.new_page(viewport={"width": 1100, "height": 900})
            page.goto(url, timeout=20_000)
            page.wait_for_function(
                "document.getElementById('source-label').textContent === 'German'",
                timeout=10_000)
            page.fill("#source", SENTENCE)
            page.click("#translate")
            page.wait_for_function(
                "document.getElementById('target').value !== ''", timeout=20_000)
            got = page.input_value("#target")
            check(got == WANT, f"the page shows {got!r}, want {WANT!r}")
            page.wait_for_selector("#attention[data-loaded='true']", timeout=20_000)
            width = page.evaluate("document.getElementById('attention').naturalWidth")
            check(width > 200, f"the heatmap is {width} pixels wide")
            status = page.text_content("#status")
            check("translated" in status, f"the page says {status!r}")
            page.screenshot(path=screenshot, full_page=True)
            print(f"page: {SENTENCE!r} -> {got!r}, heatmap {width} px wide, "
                  f"screenshot {screenshot}")
        finally:
            browser.close()


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--url", required=True)
    parser.add_argument("--screenshot", required=True)
    parser.add_argument("--chromium", default="/usr/bin/chromium")
    args = parser.parse_args()
    check_libretranslatepy(args.url)
    check_page(args.url, args.screenshot, args.chromium)


if __name__ == "__main__":
    main()
