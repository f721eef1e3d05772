"""hparams.yaml + dataset presets + --hparams overrides, and their errors."""
import pytest

from training.hparams import HParamsError, batching_fields, load_hparams, model_fields, parse_overrides


def test_defaults_resolve_with_the_demo_preset():
    hp = load_hparams()
    assert hp["dataset"] == "demo"
    assert hp["model_preset"] == "small" and hp["output_dir"] == "runs/demo"
    assert hp["batching"] == "ssb" and hp["dbs"] is True and hp["br"] is True
    assert hp["model"]["attention_rnn_dim"] == 256  # from the small preset


def test_overrides_are_typed_and_beat_the_preset():
    hp = load_hparams("batching=bkt,dbs=false,lrf=0.25,epochs=3,model_preset=full,model.attention_dim=32")
    assert (hp["batching"], hp["dbs"], hp["lrf"], hp["epochs"]) == ("bkt", False, 0.25, 3)
    assert hp["model"] == {"attention_dim": 32}
    assert model_fields(hp, 40) == {"attention_dim": 32, "n_symbols": 40, "n_frames_per_step": 2}


def test_ljspeech_switch_brings_the_full_model():
    hp = load_hparams("dataset=ljspeech")
    assert hp["model_preset"] == "full" and hp["n_frames_per_step"] == 1 and hp["epochs"] == 220


def test_capacity_zero_means_the_papers_default():
    assert batching_fields(load_hparams())["capacity"] is None
    assert batching_fields(load_hparams("capacity=12000"))["capacity"] == 12000


@pytest.mark.parametrize("text, message", [
    ("bogus=1", "unknown hparam(s) bogus"),
    ("batching=xyz", "'batching': 'xyz' is not one of rand, sb, ssb, bkt, ats"),
    ("dbs=maybe", "'dbs': 'maybe' is not a boolean"),
    ("epochs=1.5", "'epochs': '1.5' is not an integer"),
    ("epochs=0", "'epochs': 0 must be > 0"),
    ("lrf=abc", "'lrf': 'abc' is not a number"),
    ("device=tpu", "'device': 'tpu' is not one of auto, cpu, cuda, cuda:N"),
    ("dataset=filelist", "dataset=filelist needs train_filelist=PATH"),
    ("batching", "'batching' is not of the form key=value"),
])
def test_bad_values_name_the_key_and_what_is_allowed(text, message):
    with pytest.raises(HParamsError, match=message.replace("(", r"\(").replace(")", r"\)")):
        load_hparams(text)


def test_parse_overrides_ignores_empty_items():
    assert parse_overrides("a=1,,b = x ,") == {"a": "1", "b": "x"}
