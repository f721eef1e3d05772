"""The corpus table (data/corpora): hparams.yaml's presets match its rows, a corpus added as a row
and a preset is the one a run trains on, and a corpus that cannot be had is one user error that
names the setting and what to do, before anything is written."""

import dataclasses

import pytest
import yaml

from batching.errors import UserError
from data.corpora import CORPORA, Corpus, corpus_filelists, table
from training.config import RunConfig, resolve_config
from training.hparams import DEFAULTS_FILE, load_hparams


def test_every_corpus_has_a_preset_and_every_preset_a_corpus():
    assert set(yaml.safe_load(DEFAULTS_FILE.read_text())["dataset_presets"]) == set(CORPORA)


def toy_filelists(data, mel):
    return data.train_filelist, data.val_filelist


def test_a_corpus_added_as_a_row_and_a_preset_is_the_one_a_run_asks_for(tmp_path, monkeypatch):
    monkeypatch.setitem(table.CORPUS_TABLE, "toy", Corpus("toy", toy_filelists, "a toy", needs=("train_filelist",)))
    hparams = yaml.safe_load(DEFAULTS_FILE.read_text())
    hparams["dataset_presets"]["toy"] = {"output_dir": str(tmp_path / "run"), "val_filelist": "val.txt"}
    defaults = tmp_path / "hparams.yaml"
    defaults.write_text(yaml.safe_dump(hparams))
    cfg = resolve_config(load_hparams("dataset=toy,train_filelist=train.txt", defaults))
    assert cfg.train.output_dir == str(tmp_path / "run")
    assert corpus_filelists(cfg.data, cfg.mel) == ("train.txt", "val.txt")
    with pytest.raises(UserError, match="dataset=toy needs train_filelist=PATH"):
        resolve_config(load_hparams("dataset=toy", defaults))


def corpus_config(tmp_path, overrides: str) -> RunConfig:
    """The config of `overrides` with every corpus folder under tmp_path."""
    return resolve_config(load_hparams(f"demo_dir={tmp_path / 'demo'},espeak_dir={tmp_path / 'espeak'},{overrides}"))


@pytest.mark.parametrize(
    "overrides, culprit",
    [
        (
            "dataset=demo,sample_rate=16000",
            "dataset=demo is rendered at 22050 Hz with a 12.5 ms hop, not sample_rate=16000",
        ),
        ("dataset=espeak,sample_rate=16000", "dataset=espeak is synthesised at 22050 Hz"),
        (
            "dataset=espeak,transcripts=TMP/none.tsv",
            "hparam 'transcripts': file TMP/none.tsv not found: set transcripts=",
        ),
        (
            "dataset=ljspeech",
            "filelist TMP/ljspeech_train.txt not found: run `python -m scripts.tools.prepare_ljspeech",
        ),
    ],
)
def test_a_corpus_that_cannot_be_had_is_one_user_error_and_nothing_is_made(tmp_path, monkeypatch, overrides, culprit):
    monkeypatch.setattr(table, "LJSPEECH_FILELISTS", (tmp_path / "ljspeech_train.txt", tmp_path / "ljspeech_val.txt"))
    cfg = corpus_config(tmp_path, overrides.replace("TMP", str(tmp_path)))
    with pytest.raises(UserError) as caught:
        corpus_filelists(cfg.data, cfg.mel)
    assert str(caught.value).startswith(culprit.replace("TMP", str(tmp_path))) and "\n" not in str(caught.value)
    assert list(tmp_path.iterdir()) == []


def test_the_data_settings_are_checked_against_the_table():
    data = resolve_config(load_hparams("")).data
    with pytest.raises(UserError, match="'dataset': 'toy' is not one of demo "):
        dataclasses.replace(data, dataset="toy")


@pytest.mark.parametrize("value", ["0", "-3", "abc", "1.5"])
def test_n_utterances_is_a_count_or_null(value):
    assert resolve_config(load_hparams("dataset=espeak")).data.n_utterances is None
    assert resolve_config(load_hparams("dataset=espeak,n_utterances=200")).data.n_utterances == 200
    with pytest.raises(UserError, match="'n_utterances': .* must be an integer >= 1, or null"):
        resolve_config(load_hparams(f"dataset=espeak,n_utterances={value}"))
