#!/usr/bin/env python3
"""Counts sentences in and out of `transformer translate --file` over documents made by tools
no one here wrote: every sentence in must come out translated, none left in German.

Usage (in a venv with python-docx; scripts/test-document-sweep.sh makes one):
    python scripts/document-sweep.py --bin BIN --checkpoint DIR [--soffice PATH]

The checkpoint must translate "Ich mochte ein Bier." as "I want a beer." and "Ich mochte eine
Cola." as "I want a coke." (the test script trains such a model in seconds). The documents:

- a .docx made by python-docx: paragraphs of one to three sentences, a bold run inside one, a
  list, a table, a header and a footer;
- that .docx with its text parts rewritten by Python's ElementTree, which binds
  WordprocessingML to `ns0:`, and rewritten again with it as the default namespace;
- a .docx made by LibreOffice (`soffice --headless --convert-to docx`) from an HTML page,
  when LibreOffice is there;
- an HTML page, and a text file.

For each, the sentences placed in it, the translations found in the output (each paragraph of
a .docx's body, headers and footers, read by namespace), and the German sentences left. Prints one table
row a document; exit status 1 when any document loses or leaves a sentence.
"""

from __future__ import annotations

import argparse
import html
import io
import re
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
import zipfile
from pathlib import Path

import docx

GERMAN = ["Ich mochte ein Bier.", "Ich mochte eine Cola."]
ENGLISH = {"Ich mochte ein Bier.": "I want a beer.", "Ich mochte eine Cola.": "I want a coke."}
W = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"


def paragraphs() -> list[list[str]]:
    """Paragraphs of one to three sentences, both sentences in turn."""
    out, at = [], 0
    for size in [1, 2, 3, 2, 1, 3, 2]:
        out.append([GERMAN[(at + i) % 2] for i in range(size)])
        at += size
    return out


def python_docx(path: Path) -> int:
    """Writes the python-docx document; returns the sentences it holds."""
    document = docx.Document()
    placed = 0
    document.add_heading(GERMAN[0], level=1)
    placed += 1
    for sentences in paragraphs():
        document.add_paragraph(" ".join(sentences))
        placed += len(sentences)
    bold = document.add_paragraph("Ich mochte ein ")
    bold.add_run("Bier.").bold = True
    placed += 1
    for sentence in GERMAN:
        document.add_paragraph(sentence, style="List Bullet")
        placed += 1
    table = document.add_table(rows=2, cols=2)
    for i, cell in enumerate(table._cells):
        cell.text = GERMAN[i % 2]
        placed += 1
    section = document.sections[0]
    section.header.paragraphs[0].text = GERMAN[1]
    section.footer.paragraphs[0].text = GERMAN[0]
    placed += 2
    document.save(path)
    return placed


def text_parts(names: list[str]) -> list[str]:
    return [n for n in names
            if n == "word/document.xml" or re.fullmatch(r"word/(header|footer)\d+\.xml", n)]


def rewritten(source: Path, target: Path, default_namespace: bool) -> None:
    """`source` with its text parts parsed and written back by ElementTree: WordprocessingML
    under `ns0:`, or (default_namespace) as the default namespace."""
    ET.register_namespace("", W) if default_namespace else None
    with zipfile.ZipFile(source) as zin, zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as zout:
        for item in zin.infolist():
            data = zin.read(item.filename)
            if item.filename in text_parts(zin.namelist()):
                tree = ET.ElementTree(ET.fromstring(data))
                out = io.BytesIO()
                tree.write(out, xml_declaration=True, encoding="UTF-8")
                data = out.getvalue()
            zout.writestr(item, data)
    if default_namespace:
        ET._namespace_map.pop(W, None)  # noqa: SLF001 (register_namespace has no undo)
    with zipfile.ZipFile(target) as z:
        body = z.read("word/document.xml").decode()
    wanted = "<document xmlns=" if default_namespace else "<ns0:document"
    assert wanted in body, f"ElementTree wrote {body[:120]!r}"


def page(sentences: list[list[str]]) -> str:
    return "<html><body>" + "".join(
        f"<p>{html.escape(' '.join(s))}</p>" for s in sentences) + "</body></html>\n"


def libreoffice(soffice: str, work: Path, target: Path) -> int:
    source = work / "lo.html"
    source.write_text(page(paragraphs()), encoding="utf-8")
    subprocess.run([soffice, "--headless", "--norestore", f"-env:UserInstallation=file://{work}/lo",
                    "--convert-to", "docx:MS Word 2007 XML", "--outdir", str(work), str(source)],
                   check=True, capture_output=True, timeout=300)
    (work / "lo.docx").rename(target)
    return sum(len(s) for s in paragraphs())


def docx_text(path: Path) -> str:
    """Each paragraph's text (its `t` elements joined), from every text part, read by
    namespace with ElementTree: python-docx cannot find the headers of a document whose
    attributes ElementTree's default-namespace rewrite left unqualified (`type`, not
    `w:type`), though their text is there."""
    texts = []
    with zipfile.ZipFile(path) as z:
        for name in text_parts(z.namelist()):
            for paragraph in ET.fromstring(z.read(name)).iter(f"{{{W}}}p"):
                texts.append("".join(t.text or "" for t in paragraph.iter(f"{{{W}}}t")))
    return "\n".join(texts)


def translated(binary: str, checkpoint: str, source: Path) -> str:
    out = source.with_name("translated-" + source.name)
    subprocess.run([binary, "translate", "--device", "cpu", "--checkpoint", checkpoint, "--file",
                    str(source), "--out", str(out)], check=True, capture_output=True, timeout=600)
    if source.suffix == ".docx":
        return docx_text(out)
    text = out.read_text(encoding="utf-8")
    return html.unescape(re.sub(r"<[^>]+>", " ", text)) if source.suffix == ".html" else text


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bin", required=True)
    parser.add_argument("--checkpoint", required=True)
    parser.add_argument("--soffice")
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        made = work / "python-docx.docx"
        placed = python_docx(made)
        documents = [("python-docx", made, placed)]
        for name, default in [("ElementTree ns0:", False), ("ElementTree default namespace", True)]:
            target = work / f"{name.split()[-1].strip(':')}.docx"
            rewritten(made, target, default)
            documents.append((name, target, placed))
        if args.soffice:
            target = work / "libreoffice.docx"
            documents.append(("LibreOffice", target, libreoffice(args.soffice, work, target)))
        html_file = work / "page.html"
        html_file.write_text(page(paragraphs()), encoding="utf-8")
        documents.append(("HTML", html_file, sum(len(s) for s in paragraphs())))
        text_file = work / "text.txt"
        text_file.write_text("\n".join(" ".join(s) for s in paragraphs()) + "\n", encoding="utf-8")
        documents.append(("text", text_file, sum(len(s) for s in paragraphs())))
        for name, path, placed in documents:
            out = translated(args.bin, args.checkpoint, path)
            english = sum(out.count(e) for e in ENGLISH.values())
            german = sum(out.count(g.rstrip(".")) for g in GERMAN)
            rows.append((name, path.suffix, placed, english, german))
    print(f"{'made by':<30} {'file':<6} {'sentences in':>12} {'translated out':>14} "
          f"{'left German':>11}")
    failed = False
    for name, suffix, placed, english, german in rows:
        failed |= english != placed or german != 0
        print(f"{name:<30} {suffix:<6} {placed:>12} {english:>14} {german:>11}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
