"""Checks a running `transformer serve` (the tiny toy model) with real clients.

1. libretranslatepy, LibreTranslate's own Python client: translate() and languages().
2. Documents: a .docx written by python-docx, sent to /translate_file as LibreTranslate's API
   documents it (multipart/form-data: file, source, target), downloaded from the link, read
   back by python-docx (text translated, formatting and every other part kept); HTML through
   /translate with format=html, its markup compared by Python's own html.parser.
3. The page at / in headless chromium (Playwright): type a sentence, click Translate, read
   the translation from the DOM, and check that the attention heatmap loaded as an image; the
   HTML mode's rendered preview; a file uploaded and its translation downloaded.
   A screenshot of the page is written to --screenshot.
"""

import argparse
import html.parser
import io
import json
import os
import sys
import tempfile
import urllib.request
import uuid
import zipfile

import docx

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


def multipart_post(url, fields, file_name, data):
    """POST multipart/form-data as a browser or curl -F sends it."""
    boundary = uuid.uuid4().hex
    body = io.BytesIO()
    for name, value in fields.items():
        body.write(f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"\r\n\r\n'
                   f"{value}\r\n".encode())
    body.write(f'--{boundary}\r\nContent-Disposition: form-data; name="file"; '
               f'filename="{file_name}"\r\nContent-Type: application/octet-stream\r\n\r\n'
               .encode())
    body.write(data)
    body.write(f"\r\n--{boundary}--\r\n".encode())
    request = urllib.request.Request(
        url, data=body.getvalue(), method="POST",
        headers={"Content-Type": f"multipart/form-data; boundary={boundary}"})
    with urllib.request.urlopen(request, timeout=60) as response:
        return json.load(response)


def fetch(url):
    with urllib.request.urlopen(url, timeout=60) as response:
        return response.read(), response.headers


def check_docx(url):
    document = docx.Document()
    document.add_heading(SENTENCE, level=1)
    paragraph = document.add_paragraph("ich mochte ein ")
    paragraph.add_run("bier").bold = True
    document.add_paragraph(SENTENCE, style="List Bullet")
    table = document.add_table(rows=1, cols=2)
    table.rows[0].cells[0].text = SENTENCE
    table.rows[0].cells[1].text = "ich mochte ein cola"
    document.sections[0].header.paragraphs[0].text = SENTENCE
    source = io.BytesIO()
    document.save(source)
    answer = multipart_post(f"{url}/translate_file", {"source": "de", "target": "en"},
                            "Brief.docx", source.getvalue())
    link = answer["translatedFileUrl"]
    check(link.endswith(".Brief.docx"), f"translatedFileUrl is {link!r}")
    data, headers = fetch(link)
    check('filename="Brief.docx"' in headers.get("Content-Disposition", ""),
          f"download headers {dict(headers)!r}")
    translated = docx.Document(io.BytesIO(data))
    paragraphs = translated.paragraphs
    check(paragraphs[0].text == WANT and paragraphs[0].style.name == "Heading 1",
          f"the heading reads {paragraphs[0].text!r} ({paragraphs[0].style.name})")
    runs = [(run.text, bool(run.bold)) for run in paragraphs[1].runs]
    check(len(runs) == 2 and runs[1][1] and "mochte" not in paragraphs[1].text,
          f"the paragraph with a bold run reads {runs!r}")
    check(paragraphs[2].text == WANT and paragraphs[2].style.name == "List Bullet",
          f"the list item reads {paragraphs[2].text!r}")
    cells = [cell.text for cell in translated.tables[0].rows[0].cells]
    check(cells == [WANT, "i want a coke ."], f"the table reads {cells!r}")
    header = translated.sections[0].header.paragraphs[0].text
    check(header == WANT, f"the header reads {header!r}")
    before, after = zipfile.ZipFile(source), zipfile.ZipFile(io.BytesIO(data))
    check(before.namelist() == after.namelist(), "the package's entries changed")
    changed = [n for n in before.namelist() if before.read(n) != after.read(n)]
    check(sorted(changed) == ["word/document.xml", "word/header1.xml"],
          f"parts other than the text changed: {changed!r}")
    print(f"python-docx: /translate_file -> {link.rsplit('/', 1)[-1]}, heading {header!r}, "
          f"runs {runs!r}, {len(before.namelist()) - len(changed)} parts byte for byte")


class Markup(html.parser.HTMLParser):
    """The tags and attributes of a page, its text left out."""

    def __init__(self, text):
        super().__init__(convert_charrefs=True)
        self.tags = []
        self.feed(text)
        self.close()

    def handle_starttag(self, tag, attrs):
        self.tags.append(("start", tag, attrs))

    def handle_endtag(self, tag):
        self.tags.append(("end", tag))

    def handle_startendtag(self, tag, attrs):
        self.tags.append(("empty", tag, attrs))


def check_html(url):
    page = ('<div class="note"><h2>ich mochte ein <a href="/bier?x=1&amp;y=2">bier</a></h2>'
            '<p title="t">ich mochte ein cola</p><code>ich mochte ein bier</code></div>')
    request = urllib.request.Request(
        f"{url}/translate", method="POST", headers={"Content-Type": "application/json"},
        data=json.dumps({"q": page, "source": "de", "target": "en", "format": "html"}).encode())
    with urllib.request.urlopen(request, timeout=60) as response:
        translated = json.load(response)["translatedText"]
    check(Markup(translated).tags == Markup(page).tags,
          f"the markup changed: {translated!r}")
    check("<code>ich mochte ein bier</code>" in translated and "i want a coke ." in translated
          and translated.count("mochte") == 1, f"format=html gave {translated!r}")
    print(f"html.parser: format=html markup kept: {translated!r}")


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
            check_page_documents(page)
        finally:
            browser.close()


def check_page_documents(page):
    """The HTML mode's sandboxed preview, and a file through the upload form."""
    page.select_option("#format", "html")
    page.fill("#source", "<p>ich mochte ein <b>bier</b></p>")
    page.click("#translate")
    page.wait_for_function(
        "document.getElementById('target').value.includes('<b>')", timeout=20_000)
    page.wait_for_function(
        "document.getElementById('preview').style.display === 'block'", timeout=10_000)
    rendered = page.frame_locator("#preview").locator("b").text_content(timeout=10_000)
    check(rendered and "mochte" not in page.input_value("#target"),
          f"the HTML preview shows {rendered!r}")
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "notes.txt")
        with open(path, "w", encoding="utf-8") as file:
            file.write(SENTENCE + "\n\nich mochte ein cola\n")
        page.set_input_files("#file", path)
        page.click("#translate-file")
        page.wait_for_selector("#file-link:not([hidden])", timeout=30_000)
        link = page.get_attribute("#file-link", "href")
        got = page.request.get(link).text()
    check(got == WANT + "\n\ni want a coke .\n", f"the page's file link gave {got!r}")
    page.select_option("#format", "text")
    print(f"page: HTML preview shows <b>{rendered}</b>, file upload -> {got!r}")


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--url", required=True)
    parser.add_argument("--screenshot", required=True)
    parser.add_argument("--chromium", default="/usr/bin/chromium")
    args = parser.parse_args()
    check_libretranslatepy(args.url)
    check_docx(args.url)
    check_html(args.url)
    check_page(args.url, args.screenshot, args.chromium)


if __name__ == "__main__":
    main()
