"""Bad arguments raise the exception for them with the line the binary prints for the same
mistake (without its `error: `); nothing reaches Python as a panic."""

import os
import shutil
import subprocess
import sys

import pytest

import transformer
from conftest import FIXTURES, cli_error, run


def same_error(raised, binary, *args):
    assert str(raised.value) == cli_error(run(binary, *args, check=False))


def test_a_missing_checkpoint(binary, tmp_path):
    missing = tmp_path / "no-such-run"
    with pytest.raises(FileNotFoundError) as raised:
        transformer.Translator(missing)
    same_error(raised, binary, "translate", "--checkpoint", missing, "x")


def test_a_damaged_checkpoint(binary, tiny_run, tmp_path):
    damaged = tmp_path / "damaged"
    shutil.copytree(tiny_run / "last", damaged)
    weights = damaged / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:1000])
    with pytest.raises(RuntimeError) as raised:
        transformer.Translator(damaged)
    same_error(raised, binary, "translate", "--checkpoint", damaged, "x")


def test_a_beam_wider_than_the_vocabulary(binary, tiny_run):
    translator = transformer.Translator(tiny_run)
    with pytest.raises(ValueError) as raised:
        translator.translate("ich mochte ein bier", beam=1000)
    same_error(raised, binary, "translate", "--checkpoint", tiny_run, "--beam", "1000", "x")


def test_values_the_flags_refuse_are_refused_for_the_same_reason(binary, tiny_run):
    translator = transformer.Translator(tiny_run)
    for keyword, flag, value in [("beam", "--beam", 0), ("max_len", "--max-len", 0),
                                 ("length_penalty", "--length-penalty", float("inf")),
                                 ("batch_size", "--batch-size", 0)]:
        with pytest.raises(ValueError) as raised:
            translator.translate("x", **{keyword: value})
        cli = run(binary, "translate", "--checkpoint", tiny_run, flag, str(value), "x",
                  check=False)
        reason = cli_error(cli).split(": ", 1)[1]
        assert str(raised.value) == f"invalid value '{value}' for {keyword}: {reason}"
    for keyword, flag, value in [("device", "--device", "gpu"),
                                 ("compute_type", "--compute-type", "fp8"),
                                 ("source_lang", "--source-lang", "not a code")]:
        with pytest.raises(ValueError) as raised:
            transformer.Translator(tiny_run, **{keyword: value})
        cli = run(binary, "translate", "--checkpoint", tiny_run, flag, value, "x", check=False)
        reason = cli_error(cli).split(": ", 1)[1]
        assert str(raised.value) == f"invalid value '{value}' for {keyword}: {reason}"


def test_languages_a_model_lacks_or_leaves_unnamed(binary, tiny_run):
    nllb = FIXTURES / "nllb-tiny"
    with pytest.raises(ValueError) as raised:
        transformer.Translator(nllb, source_lang="xx_Yyyy", target_lang="eng_Latn")
    same_error(raised, binary, "translate", "--checkpoint", nllb, "--source-lang", "xx_Yyyy",
               "--target-lang", "eng_Latn", "x")
    with pytest.raises(ValueError) as raised:
        transformer.Translator(nllb).translate("Ein Hund.")
    same_error(raised, binary, "translate", "--checkpoint", nllb, "Ein Hund.")
    with pytest.raises(ValueError, match="this model translates only de to en"):
        transformer.Translator(tiny_run).translate("x", target_lang="fr")


def test_config_mistakes(binary, tmp_path):
    config = tmp_path / "bad.toml"
    config.write_text("[model]\nlayers = 2\nlayerz = 3\n")
    with pytest.raises(ValueError) as raised:
        transformer.train(config, out=tmp_path / "run", quiet=True)
    same_error(raised, binary, "train", "--config", config, "--out", tmp_path / "run")
    with pytest.raises(ValueError, match=r"the config dict.*training\.epocs"):
        transformer.train({"training": {"epocs": 3}}, out=tmp_path / "run2", quiet=True)
    with pytest.raises(ValueError, match="names no run directory"):
        transformer.train({"training": {"epochs": 3}}, quiet=True)
    with pytest.raises(TypeError, match="config key training.epochs"):
        transformer.train({"training": {"epochs": object()}}, out=tmp_path / "r", quiet=True)
    with pytest.raises(ValueError, match="resume cannot be used with config"):
        transformer.train(config, resume=tmp_path)


def test_runs_that_cannot_be_resumed_or_replaced(binary, tiny_run, tmp_path):
    with pytest.raises(Exception) as raised:
        transformer.train(resume=tmp_path / "nothing", quiet=True)
    same_error(raised, binary, "train", "--resume", tmp_path / "nothing")
    with pytest.raises(RuntimeError) as raised:
        transformer.train("configs/tiny.toml", out=tiny_run, quiet=True)
    same_error(raised, binary, "train", "--config", "configs/tiny.toml", "--out", tiny_run)


def test_environment_settings_are_checked(binary, tiny_run):
    env = dict(os.environ, TRANSFORMER_KERNELS="bogus")
    script = ("import transformer, sys\n"
              "try:\n    transformer.Translator(sys.argv[1])\n"
              "except ValueError as e:\n    print(e)\n")
    done = subprocess.run([sys.executable, "-c", script, str(tiny_run)], env=env,
                          capture_output=True, text=True, check=True)
    cli = subprocess.run([binary, "translate", "--checkpoint", str(tiny_run), "x"], env=env,
                         capture_output=True, text=True)
    assert done.stdout.strip() == cli_error(cli)


def test_wrong_types_are_type_errors(tiny_run):
    translator = transformer.Translator(tiny_run)
    with pytest.raises(TypeError, match="texts must be a str or a list of str, not int"):
        translator.translate(5)
    with pytest.raises(TypeError, match="beam must be a number, not bool"):
        translator.translate("x", beam=True)
    with pytest.raises(TypeError, match="on_progress must be callable"):
        transformer.train(on_progress=3)


def test_a_file_is_never_translated_onto_itself_or_into_the_model(binary, tiny_run, tmp_path):
    text = tmp_path / "brief.txt"
    text.write_text("ich mochte ein bier\n")
    translator = transformer.Translator(tiny_run)
    with pytest.raises(ValueError) as raised:
        translator.translate_file(text, text)
    same_error(raised, binary, "translate", "--checkpoint", tiny_run, "--file", text, "--out", text)
    assert text.read_text() == "ich mochte ein bier\n"
    vocabulary = tiny_run / "last" / "vocab.tgt.txt"
    before = vocabulary.read_bytes()
    with pytest.raises(ValueError) as raised:
        translator.translate_file(text, vocabulary)
    same_error(raised, binary, "translate", "--checkpoint", tiny_run, "--file", text, "--out",
               vocabulary)
    assert vocabulary.read_bytes() == before
