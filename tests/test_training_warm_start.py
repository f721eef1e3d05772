"""Fine-tuning (hparam init_checkpoint, training/warm_start.py): a new run from a checkpoint's
weights, this recipe's or NVIDIA Tacotron2's, with what did not load named."""

from pathlib import Path

import pytest
import torch

import train
from data.corpora.demo import make_demo_corpus
from model import Tacotron2
from tests.kit import tiny
from training.config import resolve_config
from training.hparams import load_hparams
from training.rundir import read_metrics
from training.warm_start import NVIDIA_MEL, matching_mel_hparams, to_nvidia_key, warm_start

#: NVIDIA's symbol table (text/symbols.py: pad, punctuation, letters and ARPAbet): the embedding's rows.
NVIDIA_SYMBOLS = 148


def nvidia_names() -> set[str]:
    """Every state-dict name of NVIDIA/tacotron2's Tacotron2 at its default sizes (5 postnet and 3
    encoder convolutions), written out from its model.py and layers.py: ConvNorm holds `.conv`,
    LinearNorm `.linear_layer`, each convolution and its BatchNorm sit in an nn.Sequential."""
    batch_norm = ("weight", "bias", "running_mean", "running_var", "num_batches_tracked")
    lstm_cell = ("weight_ih", "weight_hh", "bias_ih", "bias_hh")
    names = {"embedding.weight"}
    for stack, n in (("encoder", 3), ("postnet", 5)):
        for i in range(n):
            names |= {f"{stack}.convolutions.{i}.0.conv.weight", f"{stack}.convolutions.{i}.0.conv.bias"}
            names |= {f"{stack}.convolutions.{i}.1.{b}" for b in batch_norm}
    names |= {f"encoder.lstm.{w}_l0{d}" for w in lstm_cell for d in ("", "_reverse")}
    names |= {f"decoder.prenet.layers.{i}.linear_layer.weight" for i in (0, 1)}
    names |= {f"decoder.{cell}.{w}" for cell in ("attention_rnn", "decoder_rnn") for w in lstm_cell}
    attention = "decoder.attention_layer."
    names |= {f"{attention}{layer}.linear_layer.weight" for layer in ("query_layer", "memory_layer", "v")}
    names |= {
        f"{attention}location_layer.location_conv.conv.weight",
        f"{attention}location_layer.location_dense.linear_layer.weight",
    }
    names |= {
        f"decoder.{layer}.linear_layer.{p}" for layer in ("linear_projection", "gate_layer") for p in ("weight", "bias")
    }
    return names


def test_the_key_map_names_every_tensor_of_the_full_model_as_nvidia_does():
    cfg = resolve_config(load_hparams("model_preset=full,n_frames_per_step=1"))
    ours = Tacotron2(cfg.model).state_dict()
    assert sorted(to_nvidia_key(key) for key in ours) == sorted(nvidia_names())


def save_nvidia_checkpoint(model: Tacotron2, path: Path) -> Path:
    """`model`'s weights as NVIDIA's tacotron2_statedict.pt holds them: its names, its 148-symbol
    embedding, and the entries besides the weights that its train.py saves."""
    state = {to_nvidia_key(key): value.clone() for key, value in model.state_dict().items()}
    state["embedding.weight"] = torch.randn(NVIDIA_SYMBOLS, model.cfg.symbols_embedding_dim)
    torch.save({"state_dict": state, "optimizer": {}, "learning_rate": 1e-3, "iteration": 100}, path)
    return path


def test_an_nvidia_state_dict_starts_a_run_with_its_differences_named(tmp_path):
    source_hp = load_hparams(tiny(tmp_path, "n_frames_per_step=1"))
    torch.manual_seed(1)
    source = Tacotron2(resolve_config(source_hp).model)
    path = save_nvidia_checkpoint(source, tmp_path / "tacotron2_statedict.pt")
    hp = load_hparams(
        tiny(
            tmp_path,
            f"n_frames_per_step=1,{matching_mel_hparams(NVIDIA_MEL)},init_checkpoint={path},"
            "init_ignore=decoder.gate_layer",
        )
    )
    cfg = resolve_config(hp)
    assert cfg.mel == NVIDIA_MEL
    plan = warm_start(hp, cfg.model, cfg.mel)
    n_weights = sum(not key.endswith("num_batches_tracked") for key in source.state_dict())
    assert f"(NVIDIA Tacotron2 layout): {n_weights - 3} of {n_weights} weight tensors loaded" in plan.line
    assert (
        f"embedding.weight [{NVIDIA_SYMBOLS}, 32] -> [41, 32] (its symbol table has {NVIDIA_SYMBOLS} symbols"
        in plan.line
    )
    assert "re-initialised (init_ignore): decoder.gate_layer.weight, decoder.gate_layer.bias" in plan.line
    torch.manual_seed(2)
    model = Tacotron2(cfg.model)
    fresh = {key: value.clone() for key, value in model.state_dict().items()}
    plan.load_into(model)
    for key, value in model.state_dict().items():
        kept = key == "embedding.weight" or key.startswith("decoder.gate_layer")
        assert torch.equal(value, fresh[key] if kept else source.state_dict()[key]), key


@pytest.mark.slow
def test_fine_tuning_starts_below_a_from_scratch_run(tmp_path, demo_corpus, capsys):
    """A tiny model trained on the demo corpus for 6 steps, fine-tuned on another corpus (other
    sentences): its first epoch's training loss is below that of the same run from scratch (same
    seed, same batches)."""
    pretrained = tmp_path / "pretrained"
    common = "n_frames_per_step=4,graph_bucket=0,validate_every=10"
    pretrain = tiny(tmp_path, f"{common},stop_after_steps=6,learning_rate=0.005,output_dir={pretrained}", demo_corpus)
    assert train.main(["--hparams", pretrain]) == 0
    train_list, val_list = make_demo_corpus(tmp_path / "second", 16, seed=1)
    second = (
        f"{common},dataset=filelist,train_filelist={train_list},val_filelist={val_list},"
        f"mel_cache_dir={tmp_path / 'mels'},epochs=1"
    )
    capsys.readouterr()
    for name, extra in (("scratch", ""), ("finetuned", f",init_checkpoint={pretrained}")):
        assert train.main(["--hparams", tiny(tmp_path, f"{second},output_dir={tmp_path / name}{extra}")]) == 0
    printed = capsys.readouterr().out
    # stopped before its first validation: the folder has no checkpoint_best.pt, so its last is read
    assert f"init_checkpoint {pretrained / 'checkpoint_last.pt'} (this recipe's checkpoint): " in printed
    loss = {name: read_metrics(tmp_path / name)[0]["train_loss"] for name in ("scratch", "finetuned")}
    assert loss["finetuned"] < loss["scratch"], loss
