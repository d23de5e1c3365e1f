"""`transformer.train` runs the `train` command's run: the same run directory (the binary
translates and resumes it), progress on the calling thread, and Ctrl-C (KeyboardInterrupt)
stopping after a step with a checkpoint that a resume continues."""

import json
import signal
import subprocess
import sys
import textwrap
import tomllib

import pytest

import transformer
from conftest import REPO, run

TINY = tomllib.loads((REPO / "configs" / "tiny.toml").read_text())


def tiny(epochs=80, **training):
    config = json.loads(json.dumps(TINY))
    config["data"]["train"] = str(REPO / "data" / "toy.tsv")
    config["training"].update(epochs=epochs, **training)
    return config


def test_a_config_dict_trains_a_run_the_binary_translates(binary, tmp_path):
    events = []
    result = transformer.train(tiny(), out=tmp_path / "run", quiet=True, on_progress=events.append)
    assert result.finished and result.step == result.total_steps > 0
    assert result.run_dir == tmp_path / "run"
    assert (result.checkpoint / "model.safetensors").is_file()
    steps = [e for e in events if e["kind"] == "step"]
    assert [e["step"] for e in steps] == list(range(1, result.total_steps + 1))
    assert all(e["loss"] > 0 and e["total_steps"] == result.total_steps for e in steps)
    epochs = [e for e in events if e["kind"] == "epoch"]
    assert len(epochs) == 80 and epochs[-1]["train_loss"] < epochs[0]["train_loss"]
    assert [r["kind"] for r in result.records if r["kind"] != "step"][-1] == "run"
    ours = transformer.Translator(result.run_dir).translate("ich mochte ein bier").translation
    cli = run(binary, "translate", "--checkpoint", result.run_dir, "ich mochte ein bier").stdout
    assert cli.strip() == ours == "i want a beer ."


def test_the_same_config_trains_the_same_weights_as_the_binary(binary, tmp_path):
    config_file = tmp_path / "tiny.toml"
    config_file.write_text((REPO / "configs" / "tiny.toml").read_text().replace(
        '"data/toy.tsv"', json.dumps(str(REPO / "data" / "toy.tsv"))).replace(
        "epochs = 80", "epochs = 5"))
    transformer.train(config_file, out=tmp_path / "py", quiet=True)
    run(binary, "train", "--quiet", "--config", config_file, "--out", tmp_path / "cli")
    for name in ["model.safetensors", "optimizer.safetensors", "vocab.src.txt"]:
        assert (tmp_path / "py" / "last" / name).read_bytes() == \
            (tmp_path / "cli" / "last" / name).read_bytes()


SCRIPT = textwrap.dedent("""
    import sys, transformer
    def progress(event):
        if event["kind"] == "step" and event["step"] == 3:
            print("at step 3", flush=True)
    transformer.train({config!r}, out={out!r}, quiet=True, on_progress=progress)
""")


def test_a_keyboard_interrupt_leaves_a_run_that_resumes(binary, tmp_path):
    out = tmp_path / "run"
    script = SCRIPT.format(config=tiny(epochs=400), out=str(out))
    child = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    assert child.stdout.readline().strip() == "at step 3"
    child.send_signal(signal.SIGINT)
    _, stderr = child.communicate(timeout=120)
    # Python's own exit for an uncaught KeyboardInterrupt: killed by SIGINT.
    assert child.returncode == -signal.SIGINT, stderr
    last = stderr.strip().splitlines()[-1]
    assert last.startswith("KeyboardInterrupt: interrupted by SIGINT at step "), stderr
    assert f"checkpoint saved in {out / 'last'}" in last
    state = json.loads((out / "last" / "training_state.json").read_text())
    stopped_at = int(last.split("at step ")[1].split()[0])
    assert 3 <= stopped_at < 400
    assert state["position"]["step"] == state["adam_steps"] == stopped_at
    # Resumed by the package, it goes on from that step to the end.
    events = []
    result = transformer.train(resume=out, quiet=True, on_progress=events.append)
    assert result.finished and result.step == result.total_steps == 400
    assert [e["step"] for e in events if e["kind"] == "step"][0] == stopped_at + 1


def test_an_exception_in_on_progress_stops_the_run_with_a_checkpoint(tmp_path):
    class Enough(Exception):
        pass

    def progress(event):
        if event["kind"] == "step" and event["step"] == 5:
            raise Enough("seen enough")

    with pytest.raises(Enough, match="seen enough"):
        transformer.train(tiny(epochs=300), out=tmp_path / "run", quiet=True, on_progress=progress)
    state = json.loads((tmp_path / "run" / "last" / "training_state.json").read_text())
    assert state["position"]["step"] == 5
    result = transformer.train(resume=tmp_path / "run", quiet=True, stop_at_step=20)
    assert not result.finished and result.step == 20


def test_stop_at_step_and_resume_finish_the_run(tmp_path):
    first = transformer.train(tiny(epochs=10), out=tmp_path / "run", quiet=True, stop_at_step=4)
    assert (first.finished, first.step, first.total_steps) == (False, 4, 10)
    second = transformer.train(resume=tmp_path / "run", quiet=True)
    assert (second.finished, second.step) == (True, 10)
    # A finished run has nothing left: said, not an error.
    assert transformer.train(resume=tmp_path / "run", quiet=True).step == 10
