"""Translations from Python equal the binary's on the same checkpoint (text, tokens, ids and
log-probabilities), for our own model, the MarianMT fixtures and the multilingual ones (whose
ids transformers' generate() also gave), in every compute type, from 8 threads at once."""

import json
import os
import signal
import struct
import subprocess
import sys
import textwrap
import threading
import time

import pytest

import transformer
from conftest import FIXTURES, cli_json, run

PARITY_SOURCES = ["ich mochte ein bier", "du habe eine cola bier", "er mochte wasser",
                  "sie habe ein haus ein bier ein cola"]


def as_float32(number):
    return struct.unpack("f", struct.pack("f", number))[0]


def assert_same(python, cli):
    assert len(python) == len(cli)
    for ours, theirs in zip(python, cli):
        assert ours.translation == theirs["translation"]
        assert ours.tokens == theirs["tokens"]
        assert ours.ids == theirs["ids"]
        # The same code on the same batch: the same float32 numbers, to the bit (the JSON
        # prints each as the shortest decimal that reads back as it).
        assert ours.log_probs == [as_float32(p) for p in theirs["log_probs"]]
        assert ours.short == theirs.get("short", False)
        assert ours.score == pytest.approx(sum(theirs["log_probs"]), rel=1e-6)


def marian_sources(name):
    expected = json.loads((FIXTURES / name / "expected.json").read_text())
    return expected["tokenized"]["sources"][:12]


@pytest.mark.parametrize("beam", [1, 4])
def test_our_own_model_equals_the_binary(binary, tiny_run, beam):
    sources = ["ich mochte ein bier", "ich mochte ein cola", "ein bier. ein cola.", ""]
    translator = transformer.Translator(tiny_run, device="cpu")
    got = translator.translate(sources, beam=beam, return_scores=True)
    assert_same(got, cli_json(binary, tiny_run, sources, "--beam", beam))
    assert translator.translate("ich mochte ein bier").translation == got[0].translation


@pytest.mark.parametrize("beam", [1, 4])
def test_the_pytorch_parity_fixture_equals_the_binary(binary, beam):
    checkpoint = FIXTURES / "parity"
    got = transformer.Translator(checkpoint).translate(PARITY_SOURCES, beam=beam, return_scores=True)
    assert_same(got, cli_json(binary, checkpoint, PARITY_SOURCES, "--beam", beam))


@pytest.mark.parametrize("name", ["marian-shared", "marian-separate", "marian-gelu"])
@pytest.mark.parametrize("beam", [1, 4])
def test_marian_fixtures_equal_the_binary(binary, name, beam):
    checkpoint = FIXTURES / name
    sources = marian_sources(name)
    got = transformer.Translator(checkpoint).translate(sources, beam=beam, return_scores=True)
    assert_same(got, cli_json(binary, checkpoint, sources, "--beam", beam))


@pytest.mark.parametrize("name", ["m2m100-tiny", "nllb-tiny"])
def test_multilingual_fixtures_equal_the_binary_and_transformers(binary, name):
    checkpoint = FIXTURES / name
    expected = json.loads((FIXTURES / name / "expected.json").read_text())
    translator = transformer.Translator(checkpoint)
    assert translator.languages and len(translator.languages) > 2
    for pair in expected["generate"]:
        source, target = pair["source_lang"], pair["target_lang"]
        for search, beam in [("greedy", 1), ("beam", 4)]:
            got = translator.translate(pair["sources"], beam=beam, source_lang=source,
                                       target_lang=target, sentence_split=False,
                                       return_scores=True)
            assert_same(got, cli_json(binary, checkpoint, pair["sources"], "--beam", beam,
                                      "--source-lang", source, "--target-lang", target,
                                      "--no-sentence-split"))
            # transformers' generate(): `</s>` and the language token lead, padding trails.
            want = [[i for i in row[2:] if i != 1] for row in pair[search]["ids"]]
            assert [t.ids for t in got] == want
    # The pair named when opening serves every call that names none.
    first = expected["generate"][0]
    opened = transformer.Translator(checkpoint, source_lang=first["source_lang"],
                                    target_lang=first["target_lang"])
    assert [t.ids for t in opened.translate(first["sources"], sentence_split=False)] == [
        t.ids for t in translator.translate(first["sources"], sentence_split=False,
                                            source_lang=first["source_lang"],
                                            target_lang=first["target_lang"])]


@pytest.mark.parametrize("compute_type", ["int8", "bfloat16", "float32"])
def test_compute_types_equal_the_binary(binary, tiny_run, compute_type):
    # On a CPU without int8 or bf16 products both sides decode in float32 and say so.
    sources = ["ich mochte ein bier", "ich mochte ein cola"]
    for checkpoint, texts in [(tiny_run, sources), (FIXTURES / "marian-shared",
                                                    marian_sources("marian-shared"))]:
        translator = transformer.Translator(checkpoint, compute_type=compute_type)
        assert translator.compute_type == compute_type
        got = translator.translate(texts, beam=2, return_scores=True)
        assert_same(got, cli_json(binary, checkpoint, texts, "--beam", 2,
                                  "--compute-type", compute_type))


def test_eight_threads_at_once_give_what_one_gives():
    translator = transformer.Translator(FIXTURES / "marian-shared")
    sources = marian_sources("marian-shared")
    alone = {beam: [(t.ids, t.log_probs) for t in translator.translate(
        sources, beam=beam, return_scores=True)] for beam in (1, 3)}
    results, errors = [], []
    start = threading.Barrier(8)

    def work(k):
        try:
            start.wait()
            for round in range(3):
                beam = (1, 3)[(k + round) % 2]
                got = translator.translate(sources, beam=beam, return_scores=True)
                results.append((beam, [(t.ids, t.log_probs) for t in got]))
        except Exception as error:  # noqa: BLE001 - reported below
            errors.append(error)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    assert len(results) == 24
    for beam, got in results:
        assert got == alone[beam]


def test_a_str_gives_one_result_and_a_list_a_list(tiny_run):
    translator = transformer.Translator(tiny_run)
    one = translator.translate("ich mochte ein bier")
    assert isinstance(one, transformer.Translation)
    assert str(one) == one.translation
    assert one.score is None and one.log_probs is None
    assert translator.translate([]) == []
    many = translator.translate(["ich mochte ein bier"] * 3)
    assert [t.translation for t in many] == [one.translation] * 3
    # An unknown word is reported, not fatal.
    unknown = translator.translate("ich mochte ein zebra")
    assert unknown.unknown_words == ["zebra"]


def test_html_and_files_equal_the_binary(binary, tiny_run, tmp_path):
    translator = transformer.Translator(tiny_run)
    page = '<p>ich mochte ein <b>bier</b>. ich mochte ein cola.</p>'
    cli = run(binary, "translate", "--checkpoint", tiny_run, "--format", "html", page).stdout
    assert translator.translate(page, format="html") == cli.rstrip("\n")
    assert translator.translate([page, page], format="html") == [cli.rstrip("\n")] * 2
    for name, text in [("in.txt", "ich mochte ein bier\n\nich mochte ein cola. ein bier.\n"),
                       ("in.html", "<html><body><h1>ich mochte ein bier</h1></body></html>")]:
        source = tmp_path / name
        source.write_text(text)
        ours, theirs = tmp_path / ("py-" + name), tmp_path / ("cli-" + name)
        count = translator.translate_file(source, ours)
        run(binary, "translate", "--checkpoint", tiny_run, "--file", source, "--out", theirs)
        assert ours.read_bytes() == theirs.read_bytes()
        assert count >= 1


def test_a_word_file_equals_the_binary(binary, tiny_run, tmp_path):
    docx = pytest.importorskip("docx")
    document = docx.Document()
    document.add_paragraph("ich mochte ein bier. ich mochte ein cola.")
    document.add_paragraph().add_run("ein bier").bold = True
    source = tmp_path / "brief.docx"
    document.save(source)
    translator = transformer.Translator(tiny_run)
    assert translator.translate_file(source, tmp_path / "py.docx") == 3
    run(binary, "translate", "--checkpoint", tiny_run, "--file", source, "--out",
        tmp_path / "cli.docx")
    assert (tmp_path / "py.docx").read_bytes() == (tmp_path / "cli.docx").read_bytes()
    translated = docx.Document(tmp_path / "py.docx")
    paragraph = "ich mochte ein bier. ich mochte ein cola."
    assert translated.paragraphs[0].text == translator.translate(paragraph).translation
    assert translated.paragraphs[0].text != paragraph


def test_a_forked_child_translates_after_its_parent_has(tiny_run):
    translator = transformer.Translator(tiny_run)
    want = translator.translate("ich mochte ein bier").translation
    read, write = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover - the child reports through the pipe
        try:
            signal.alarm(60)
            got = transformer.Translator(tiny_run).translate("ich mochte ein bier").translation
            again = translator.translate("ich mochte ein bier").translation
            os.write(write, f"{got}|{again}".encode())
        finally:
            os._exit(0)
    os.close(write)
    _, status = os.waitpid(child, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert os.read(read, 1000).decode() == f"{want}|{want}"


def test_ctrl_c_stops_a_long_translation(tiny_run):
    script = textwrap.dedent(f"""
        import sys, transformer
        translator = transformer.Translator({str(tiny_run)!r})
        print("decoding", flush=True)
        translator.translate(["ich mochte ein bier " * 2000] * 400)
        print("finished", flush=True)
    """)
    child = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    assert child.stdout.readline().strip() == "decoding"
    time.sleep(0.5)
    child.send_signal(signal.SIGINT)
    # The whole decode takes minutes; the interrupt stops it at its next step.
    out, err = child.communicate(timeout=60)
    assert child.returncode == -signal.SIGINT, err
    assert "finished" not in out
    assert err.strip().splitlines()[-1] == "KeyboardInterrupt"
