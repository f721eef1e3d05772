"""hparams.yaml + dataset presets + --hparams overrides -> typed configs, and their errors."""

import re

import pytest

from batching import BatchingConfig, parse_overrides
from training.config import resolve_config
from training.hparams import HParamsError, load_hparams, resume_hparams


def config(text=""):
    return resolve_config(load_hparams(text))


def test_defaults_resolve_with_the_demo_preset():
    hp = load_hparams()
    assert hp["dataset"] == "demo"
    assert hp["model_preset"] == "small" and hp["output_dir"] == "runs/demo"
    assert hp["batching"] == "ssb" and hp["dbs"] is True and hp["br"] is True
    assert hp["model"]["attention_rnn_dim"] == 256  # from the small preset


def test_the_default_ssb_is_the_cost_key_calibrated_to_the_papers_ssbs_zpr():
    batching = config().batching
    assert (batching.batching, batching.ssb_key, batching.target_zpr) == ("ssb", "cost", "paper")
    assert batching.target_pair_repeat is None
    assert (
        config("target_zpr=6.62").batching.target_zpr == 6.62
        and config("target_zpr=paper").batching.target_zpr == "paper"
    )
    with pytest.raises(
        HParamsError, match=r"hparam 'target_zpr': 'six' is invalid: expected a number in \(0, 100.0\), 'paper'"
    ):
        config("target_zpr=six")


@pytest.mark.parametrize(
    "text, key, zpr, pair_repeat, lrf",
    [
        ("ssb_key=length", "length", None, None, 0.1),  # the paper's SSB, one option away
        ("ssb_key=null", None, None, None, 0.1),
        ("lrf=0.2", "cost", None, None, 0.2),  # a width given: the default target gives way
        ("ssb_key=length,target_zpr=5", "length", 5.0, None, 0.1),  # the paper's key, calibrated
        ("target_pair_repeat=0.05", "cost", None, 0.05, 0.1),  # the other target: the default ZPR gives way
        ("target_zpr=null", "cost", None, None, 0.1),
        ("batching=bkt", None, None, None, 0.1),  # SSB's defaults do not follow another strategy
        ("batching=stream,lrf=0.3", None, None, None, 0.3),
    ],
)
def test_one_rule_between_ssbs_width_settings(text, key, zpr, pair_repeat, lrf):
    batching = config(text).batching
    assert (batching.ssb_key, batching.target_zpr, batching.target_pair_repeat, batching.lrf) == (
        key,
        zpr,
        pair_repeat,
        lrf,
    )


def test_a_width_and_a_target_both_given_is_an_error_and_a_resume_keeps_the_target(tmp_path):
    with pytest.raises(HParamsError, match=r"hparams 'lrf' and 'target_zpr' both set SSB's noise width: keep lrf"):
        load_hparams("lrf=0.2,target_zpr=5")
    with pytest.raises(HParamsError, match="ssb_key=cost applies only to batching=ssb"):
        config("batching=rand,ssb_key=cost")
    stored = load_hparams("target_zpr=8")
    assert resume_hparams(stored, "epochs=3")["target_zpr"] == 8.0
    older = {
        k: v
        for k, v in load_hparams("ssb_key=length").items()
        if k not in ("ssb_key", "target_zpr", "target_pair_repeat")
    }
    resumed = resume_hparams(older, "")  # written before the cost key: planned with the paper's
    assert (resumed["ssb_key"], resumed["target_zpr"], resumed["lrf"]) == (None, None, 0.1)


def test_overrides_are_typed_and_beat_the_preset():
    hp = load_hparams("batching=bkt,dbs=false,lrf=0.25,epochs=3,model_preset=full,model.attention_dim=32")
    assert (hp["batching"], hp["dbs"], hp["lrf"], hp["epochs"]) == ("bkt", False, 0.25, 3)
    assert hp["model"] == {"attention_dim": 32}
    model = resolve_config(hp).model
    assert (model.attention_dim, model.n_frames_per_step, model.attention_rnn_dim) == (32, 2, 1024)


def test_ljspeech_switch_brings_the_full_model():
    hp = load_hparams("dataset=ljspeech")
    assert hp["model_preset"] == "full" and hp["n_frames_per_step"] == 1 and hp["epochs"] == 220


@pytest.mark.parametrize(
    "text, fast, bucket",
    [
        ("dataset=ljspeech", True, 64),  # the GPU recipe: graphs on CUDA
        ("dataset=filelist,train_filelist=a.txt,val_filelist=b.txt", True, 64),
        ("dataset=demo", True, 0),  # CPU-sized: no padded loop
        ("dataset=ljspeech,graph_bucket=0", True, 0),
        ("dataset=ljspeech,graph_bucket=32", True, 32),
        ("dataset=ljspeech,batching=bload,block_length=1600", True, 0),  # blocks have one shape already
        ("dataset=ljspeech,fast_decoder=false", False, 0),  # the plain loop cannot pad
        ("dataset=ljspeech,n_frames_per_step=3", True, 0),  # 64 is not a multiple of 3
        ("dataset=ljspeech,n_frames_per_step=4", True, 64),
    ],
)
def test_a_presets_graph_bucket_gives_way_where_the_run_cannot_pad(text, fast, bucket):
    cfg = config(text)
    assert (cfg.model.fast_decoder, cfg.train.graph_bucket, cfg.train.cuda_graphs) == (fast, bucket, "auto")


def test_a_graph_bucket_given_where_the_run_cannot_pad_is_an_error_and_a_resume_keeps_its_own():
    with pytest.raises(
        HParamsError,
        match="'graph_bucket': 64 must be a multiple of n_frames_per_step=1 and needs "
        "fast_decoder=true and a strategy whose plan is not a block plan",
    ):
        config("dataset=ljspeech,batching=bload,block_length=1600,graph_bucket=64")
    for bad in ("sixty", "-64", "6.5"):
        with pytest.raises(HParamsError, match=f"'graph_bucket': '{bad}' is invalid: expected auto or a whole number"):
            config(f"dataset=ljspeech,graph_bucket={bad}")
    assert config("graph_bucket=auto").train.graph_bucket == 64  # the demo's r=2 divides 64
    stored = load_hparams("dataset=ljspeech") | {
        "fast_decoder": False,
        "graph_bucket": 0,
    }  # a run from before the preset
    hp = resume_hparams(stored, "epochs=5")
    assert (hp["fast_decoder"], hp["graph_bucket"], hp["epochs"]) == (False, 0, 5)


def test_optional_settings_are_null_and_a_given_value_is_read_as_yaml():
    hp = load_hparams()
    assert hp["capacity"] is hp["max_length"] is hp["block_length"] is None
    assert config().batching.capacity is None and config("capacity=null").batching.capacity is None
    assert config("capacity=12000").batching.capacity == 12000
    assert config("batching=stream,max_length=700").batching.max_length == 700
    assert config("batching=bload,block_length=400").batching.block_length == 400


def test_resume_reads_the_zero_an_older_run_stored_for_unset_as_null():
    """Runs written by older versions stored 0 for unset capacity, max_length and block_length."""
    stored = load_hparams("batching=stream") | {"capacity": 0, "max_length": 0, "block_length": 0}
    hp = resume_hparams(stored, "epochs=5")
    assert (hp["capacity"], hp["max_length"], hp["block_length"], hp["epochs"]) == (None, None, None, 5)
    assert resolve_config(hp).batching == config("batching=stream").batching


def test_typed_configs_split_the_hparams():
    cfg = config("batching=bload,block_length=400,epochs=4")
    assert cfg.batching == BatchingConfig("bload", batch_size=16, br=True, block_length=400, n_frames_per_step=2)
    assert cfg.train.epochs == 4 and cfg.data.dataset == "demo"
    assert config().batching.n_frames_per_step == 1  # recorded for packed strategies only


def test_mel_settings_are_hparams():
    mel = config().mel
    assert (mel.sample_rate, mel.win_length, mel.hop_length, mel.n_mels) == (22050, 1103, 276, 80)
    cfg = config("dataset=ljspeech,sample_rate=16000,n_mels=64")
    assert (cfg.mel.win_length, cfg.mel.hop_length, cfg.model.n_mel_channels) == (800, 200, 64)
    with pytest.raises(HParamsError, match="'win_ms': a 100.0 ms window is 2205 samples, more than n_fft=2048"):
        config("win_ms=100")
    with pytest.raises(HParamsError, match="fmax <= sample_rate / 2 = 8000 Hz"):
        config("dataset=ljspeech,sample_rate=16000,fmax=9000")


def test_resume_keeps_the_runs_settings_and_allows_few_changes():
    stored = load_hparams("batching=sb,epochs=3")
    stored.pop("n_mels")  # a run from before a setting existed: it takes the default
    hp = resume_hparams(stored, "epochs=5")
    assert (hp["batching"], hp["epochs"], hp["n_mels"]) == ("sb", 5, 80)
    with pytest.raises(HParamsError, match="'batching' cannot change in a resumed run"):
        resume_hparams(stored, "batching=ssb")


@pytest.mark.parametrize(
    "text, message",
    [
        ("bogus=1", "unknown hparam(s) bogus"),
        ("batching=xyz", "'batching': 'xyz' is not one of rand, sb, ssb, bkt, ats"),
        ("loss_norm=mean", "'loss_norm': 'mean' is not one of valid, padded"),
        ("amp=fp8", "'amp': 'fp8' is not one of off, bf16, fp16"),
        ("matmul_precision=fast", "'matmul_precision': 'fast' is not one of highest, high, medium"),
        ("log_every=0", "log_every"),
        ("lr_batch_scaling=cube", "'lr_batch_scaling': 'cube' is not one of none, sqrt, linear"),
        ("model_preset=huge", "'model_preset': 'huge' is not one of full, small, tiny, micro"),
        ("batch_size=0", "hparam 'batch_size': 0 is invalid: expected an integer >= 1"),
        (
            "capacity=abc",
            "hparam 'capacity': 'abc' is invalid: expected an integer >= 1, or null (None) to leave it unset",
        ),
        ("capacity=-1", "hparam 'capacity': -1 is invalid: expected an integer >= 1, or null"),
        ("capacity=0", "hparam 'capacity': 0 is invalid: expected an integer >= 1, or null (None) to leave it unset"),
        ("batching=stream,max_length=1.5", "hparam 'max_length': 1.5 is invalid: expected an integer >= 1, or null"),
        ("batching=bload,block_length=[1", "'block_length': '[1' is not a value"),
        ("model.atention_dim=3", "unknown Tacotron2Config key(s) ['atention_dim']"),
        ("dbs=maybe", "'dbs': 'maybe' is not a boolean"),
        ("epochs=1.5", "'epochs': '1.5' is not an integer"),
        ("epochs=0", "'epochs': 0 must be > 0"),
        ("lrf=abc", "'lrf': 'abc' is not a number"),
        ("device=tpu", "'device': 'tpu' is not one of auto, cpu, cuda, cuda:N"),
        ("dataset=filelist", "dataset=filelist needs train_filelist=PATH"),
        ("unknown_chars=ignore", "'unknown_chars': 'ignore' is not one of error, drop"),
        ("batching", "'batching' is not of the form key=value"),
    ],
)
def test_bad_values_name_the_key_and_what_is_allowed(text, message):
    with pytest.raises(HParamsError, match=re.escape(message)):
        config(text)


def test_parse_overrides_ignores_empty_items():
    assert parse_overrides("a=1,,b = x ,") == {"a": "1", "b": "x"}
