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
    with pytest.raises(FileNotFoundError) as raised:
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
    with pytest.raises(TypeError, match=r"texts must be a list of str \(or a str\), not int"):
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


def test_odd_python_values_are_refused_by_name(tiny_run, tmp_path):
    translator = transformer.Translator(tiny_run)
    with pytest.raises(ValueError, match=r"texts\[1\] is not valid Unicode"):
        translator.translate(["ok", "\ud800"])
    with pytest.raises(ValueError, match="texts is not valid Unicode"):
        translator.translate("\ud800")
    with pytest.raises(TypeError, match=r"texts\[1\] must be a str, not int"):
        translator.translate(["ok", 3])
    with pytest.raises(ValueError, match=r"invalid value '1{400}' for beam: .* is not a whole number"):
        translator.translate("x", beam=int("1" * 400))

    class Index:
        def __index__(self):
            return 2
    assert translator.translate("ich mochte ein bier", beam=Index()).translation
    with pytest.raises(ValueError, match="invalid value '-1' for seed"):
        transformer.train("configs/tiny.toml", out=tmp_path / "r", seed=-1, quiet=True)
    with pytest.raises(TypeError, match="stop_at_step must be a number, not bool"):
        transformer.train("configs/tiny.toml", out=tmp_path / "r", stop_at_step=True)
    with pytest.raises(ValueError, match="source_lang \"de\", target_lang \"zzz_Zzzz\""):
        transformer.Translator(FIXTURES / "nllb-tiny").translate(
            "Hallo", source_lang="de", target_lang="zzz_Zzzz")


def test_a_config_dict_that_holds_itself_is_refused_not_a_crash(tmp_path):
    itself = {}
    itself["again"] = itself
    with pytest.raises(ValueError, match="nested more than 32 deep"):
        transformer.train({"training": itself}, out=tmp_path / "r")
    deep = inner = {}
    for _ in range(20000):
        inner["x"] = {}
        inner = inner["x"]
    with pytest.raises(ValueError, match="nested more than 32 deep"):
        transformer.train({"training": deep}, out=tmp_path / "r")
    # Shallow, but one dict twice at each of 25 levels would be 2**25 values written out.
    shared = {"v": 1}
    for _ in range(25):
        shared = {"a": shared, "b": shared}
    with pytest.raises(ValueError, match="holds more than 100000 values"):
        transformer.train({"training": {"x": shared}}, out=tmp_path / "r")


def test_two_runs_into_one_directory_in_one_process_are_refused(tmp_path):
    import threading
    import tomllib
    config = tomllib.loads((FIXTURES.parents[1] / "configs" / "tiny.toml").read_text())
    config["data"]["train"] = str(FIXTURES.parents[1] / "data" / "toy.tsv")
    config["training"]["epochs"] = 2000
    started, errors = threading.Event(), []

    def first():
        def progress(event):
            started.set()
        try:
            transformer.train(config, out=tmp_path / "run", quiet=True, on_progress=progress,
                              stop_at_step=400)
        except Exception as error:  # noqa: BLE001 - reported below
            errors.append(error)

    thread = threading.Thread(target=first)
    thread.start()
    assert started.wait(60)
    (tmp_path / "link").symlink_to(tmp_path / "run")
    # However the directory is spelled: as it is, through `..`, through a link.
    for spelled in [tmp_path / "run", tmp_path / ".." / tmp_path.name / "run", tmp_path / "link"]:
        with pytest.raises(RuntimeError, match="is being trained by another run of this process"):
            transformer.train(config, out=spelled, quiet=True, overwrite=True)
    thread.join()
    assert not errors
    # Once the first is done, the directory is free again.
    assert transformer.train(resume=tmp_path / "run", quiet=True, stop_at_step=401).step == 401
