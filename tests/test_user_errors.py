"""A user's mistakes end in one `error: ...` line naming the culprit, exit code 2, no traceback, and
nothing changed in the run's output_dir: one test per kind of bad input, over every entry point.

Most run the entry point's main() in-process (a traceback would fail the test outright); two run
as real subprocesses, to see exactly what a user sees on stderr."""

import sys
from pathlib import Path

import pytest
import torch

import train
from model import Tacotron2
from tests.kit import run_command, tiny
from training.config import resolve_config
from training.hparams import load_hparams


def tree(path: Path) -> dict:
    """Every file under path with its size and mtime ({} when path does not exist)."""
    if not path.exists():
        return {}
    return {str(p): (p.stat().st_size, p.stat().st_mtime_ns) for p in sorted(path.rglob("*"))}


def expect_error(main, argv, capsys, culprit: str, output_dir: Path) -> None:
    before = tree(output_dir)
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and culprit in err, err
    assert "Traceback" not in err
    assert tree(output_dir) == before


@pytest.fixture
def stored_run(tmp_path) -> Path:
    """A run directory with a (model-less) checkpoint: enough for --resume to read its settings."""
    run = tmp_path / "stored"
    run.mkdir()
    torch.save(
        {"model": {}, "hparams": load_hparams(tiny(tmp_path, "epochs=1")), "progress": {}}, run / "checkpoint_last.pt"
    )
    return run


def test_unknown_hparam(tmp_path, capsys):
    expect_error(
        train.main, ["--hparams", tiny(tmp_path, "epoch=3")], capsys, "unknown hparam(s) epoch", tmp_path / "run"
    )


def test_bad_hparam_value(tmp_path, capsys):
    expect_error(
        train.main, ["--hparams", tiny(tmp_path, "lrf=fast")], capsys, "'lrf': 'fast' is not a number", tmp_path / "run"
    )


@pytest.mark.parametrize(
    "value, culprit",
    [
        ("many", "'batch_size': 'many' is invalid: expected auto or a whole"),
        ("auto,batching=bload", "auto is not available for batching=bload"),
    ],
)
def test_bad_batch_size(tmp_path, capsys, value, culprit):
    expect_error(train.main, ["--hparams", tiny(tmp_path, f"batch_size={value}")], capsys, culprit, tmp_path / "run")


def test_a_preset_that_fixes_the_sample_rate(tmp_path, capsys):
    expect_error(
        train.main,
        ["--hparams", tiny(tmp_path, "dataset=demo,sample_rate=16000")],
        capsys,
        "dataset=demo is rendered at 22050 Hz",
        tmp_path / "run",
    )


def test_model_field_of_the_wrong_type(tmp_path, capsys):
    expect_error(
        train.main,
        ["--hparams", tiny(tmp_path, "model.attention_dim=wide")],
        capsys,
        "hparam 'model.attention_dim' must be an int, got 'wide'",
        tmp_path / "run",
    )


def test_an_utterance_over_the_batch_capacity(tmp_path, capsys, demo_corpus):
    """stream skips what is over max_length; a capacity below it is a limit the data check applies."""
    expect_error(
        train.main,
        ["--hparams", tiny(tmp_path, "batching=stream,max_length=800,capacity=5", demo_corpus)],
        capsys,
        "longer than the 5 allowed by the batch capacity of 5 frames (capacity)",
        tmp_path / "run",
    )


def test_missing_filelist(tmp_path, capsys):
    hp = tiny(tmp_path, f"dataset=filelist,train_filelist={tmp_path / 'no.txt'},val_filelist={tmp_path / 'no.txt'}")
    expect_error(train.main, ["--hparams", hp], capsys, f"filelist {tmp_path / 'no.txt'} not found", tmp_path / "run")


def test_bad_filelist_line(tmp_path, capsys):
    (tmp_path / "train.txt").write_text("a.wav|te|xt|5\n")
    hp = tiny(
        tmp_path, f"dataset=filelist,train_filelist={tmp_path / 'train.txt'},val_filelist={tmp_path / 'train.txt'}"
    )
    expect_error(
        train.main,
        ["--hparams", hp],
        capsys,
        f"{tmp_path / 'train.txt'}:1: expected 'wav_path|text|frames' or 'wav_path|text', found 4 fields",
        tmp_path / "run",
    )


def user_corpus(root: Path, n: int = 6) -> tuple[Path, Path, list[str]]:
    """A user's own corpus as another tool would leave it: float WAVs of noise, filelists with
    relative paths; 4 training lines, 2 validation lines (returned too, to be spoiled)."""
    import numpy as np
    import soundfile as sf

    from data.audio import n_frames

    (root / "wavs").mkdir(parents=True)
    lines = []
    for i in range(n):
        samples = np.random.default_rng(i).uniform(-0.3, 0.3, 4000 + 500 * i).astype(np.float32)
        sf.write(str(root / "wavs" / f"c{i}.wav"), samples, 22050, subtype="FLOAT")
        lines.append(f"wavs/c{i}.wav|clip number {i}.|{n_frames(samples.size)}")
    return root / "train.txt", root / "val.txt", lines


def write_corpus_lists(train: Path, val: Path, lines: list[str]) -> str:
    train.write_text("\n".join(lines[:4]) + "\n")
    val.write_text("\n".join(lines[4:]) + "\n")
    return f"dataset=filelist,train_filelist={train},val_filelist={val}"


@pytest.mark.parametrize("check", [False, True], ids=["train", "check"])
def test_a_clip_with_nan_samples_stops_the_run_before_the_first_step(tmp_path, capsys, check):
    import soundfile as sf

    train_list, val_list, lines = user_corpus(tmp_path / "corpus")
    broken = tmp_path / "corpus" / "wavs" / "c2.wav"
    samples, rate = sf.read(str(broken), dtype="float32")
    samples[1000] = float("nan")
    sf.write(str(broken), samples, rate, subtype="FLOAT")
    hp = tiny(tmp_path, write_corpus_lists(train_list, val_list, lines))
    expect_error(
        train.main,
        ["--check"] * check + ["--hparams", hp],
        capsys,
        f"{train_list}:3: {broken} holds 1 NaN or infinite sample(s)",
        tmp_path / "run",
    )
    assert not (tmp_path / "run").exists()


def sf_rewrite(path: Path, channels: int = 1, rate: int = 22050, subtype: str = "FLOAT") -> None:
    """Write the clip again as another tool might have: more channels, another rate or sample format."""
    import numpy as np
    import soundfile as sf

    samples, _ = sf.read(str(path), dtype="float32")
    sf.write(str(path), np.repeat(samples[:, None], channels, axis=1), rate, subtype=subtype)


def in_latin1(wavs: Path, train: Path, val: Path) -> None:  # noqa: ARG001 - a SPOILED_CORPORA entry
    """A non-ASCII text on line 2, the filelist saved in Latin-1 (as many Windows tools do)."""
    lines = train.read_text().splitlines()
    lines[1] = lines[1].replace("clip number", "na\u00efve clip")
    train.write_bytes("\n".join(lines).encode("latin-1") + b"\n")


SPOILED_CORPORA = {  # how another tool's corpus can be unfit -> what the one error line must name
    "stereo": (lambda wavs, train, val: sf_rewrite(wavs / "c1.wav", channels=2), "c1.wav has 2 channels"),
    "16kHz": (lambda wavs, train, val: sf_rewrite(wavs / "c1.wav", rate=16000), "c1.wav is at 16000 Hz, expected"),
    "8-bit": (lambda wavs, train, val: sf_rewrite(wavs / "c1.wav", subtype="PCM_U8"), "c1.wav holds WAV/PCM_U8 audio"),
    "overlap": (
        lambda wavs, train, val: val.write_text(val.read_text() + train.read_text().splitlines()[0] + "\n"),
        "val.txt:3: train and val overlap: same clip",
    ),
    "latin-1": (in_latin1, "train.txt:2: is not UTF-8 text (byte 0xef; as Latin-1 the line reads 'wavs/c1.wav|"),
    "empty": (lambda wavs, train, val: train.write_text("\n\n"), "train.txt: holds no utterances"),
}


@pytest.mark.parametrize("kind", SPOILED_CORPORA)
def test_a_users_corpus_is_refused_up_front_naming_the_culprit(tmp_path, capsys, kind):
    """Each way another tool's corpus can be unfit: one error naming it, exit 2, nothing written.
    (24-bit and float clips, CRLF, a byte-order mark: tests/test_data_check.py shows they are taken.)"""
    train_list, val_list, lines = user_corpus(tmp_path / "corpus")
    hp = tiny(tmp_path, write_corpus_lists(train_list, val_list, lines))
    spoil, culprit = SPOILED_CORPORA[kind]
    spoil(tmp_path / "corpus" / "wavs", train_list, val_list)
    expect_error(train.main, ["--hparams", hp], capsys, culprit, tmp_path / "run")
    assert not (tmp_path / "run").exists()


def test_resume_without_a_checkpoint(tmp_path, capsys):
    expect_error(
        train.main,
        ["--resume", str(tmp_path / "nowhere")],
        capsys,
        f"no checkpoint at {tmp_path / 'nowhere' / 'checkpoint_last.pt'}",
        tmp_path / "nowhere",
    )


def test_resume_from_a_damaged_checkpoint(stored_run, capsys):
    (stored_run / "checkpoint_last.pt").write_bytes(b"half a checkpoint")
    expect_error(
        train.main, ["--resume", str(stored_run)], capsys, f"{stored_run / 'checkpoint_last.pt'} is damaged", stored_run
    )


def test_resume_with_changed_settings(stored_run, capsys):
    expect_error(
        train.main,
        ["--resume", str(stored_run), "--hparams", "batch_size=32"],
        capsys,
        "'batch_size' cannot change in a resumed run",
        stored_run,
    )


def test_output_dir_that_cannot_be_written(tmp_path, capsys, demo_corpus):
    (tmp_path / "taken").write_text("a file where the run's folder would go")
    expect_error(
        train.main,
        ["--hparams", tiny(tmp_path, f"output_dir={tmp_path / 'taken' / 'run'}", demo_corpus)],
        capsys,
        f"{tmp_path / 'taken'} is a file, not a folder",
        tmp_path / "taken",
    )


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA")
def test_cuda_asked_for_without_cuda(tmp_path, capsys):
    expect_error(train.main, ["--hparams", tiny(tmp_path, "device=cuda")], capsys, "sees no CUDA GPU", tmp_path / "run")


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA")
def test_mixed_precision_on_the_cpu(tmp_path, capsys):
    expect_error(
        train.main,
        ["--hparams", tiny(tmp_path, "amp=bf16,device=cpu")],
        capsys,
        "'amp': bf16 needs a CUDA device",
        tmp_path / "run",
    )


def test_synthesis_of_a_text_that_cleans_to_nothing(tmp_path, capsys):
    from scripts.tools import synthesize

    hp = load_hparams(tiny(tmp_path))
    torch.save(
        {"model": Tacotron2(resolve_config(hp).model).state_dict(), "hparams": hp, "progress": {}},
        tmp_path / "model.pt",
    )
    expect_error(
        synthesize.main,
        ["--checkpoint", str(tmp_path / "model.pt"), "--text", "  ", "--out", str(tmp_path / "synth")],
        capsys,
        "cleans to nothing",
        tmp_path / "synth",
    )


def test_synthesis_without_a_checkpoint(tmp_path, capsys):
    from scripts.tools import synthesize

    expect_error(
        synthesize.main,
        ["--checkpoint", str(tmp_path / "none.pt"), "--text", "hello", "--out", str(tmp_path / "synth")],
        capsys,
        f"no checkpoint at {tmp_path / 'none.pt'}",
        tmp_path / "synth",
    )


def test_batching_cli_bad_lengths_file(tmp_path, capsys):
    from batching.cli import main

    (tmp_path / "lengths.txt").write_text("a.wav|text|120\nb.wav|text|many\n")
    expect_error(
        main,
        ["stats", "--lengths", str(tmp_path / "lengths.txt")],
        capsys,
        f"{tmp_path / 'lengths.txt'}:2: frames 'many' is not an integer",
        tmp_path / "out",
    )


def test_bench_epoch_bad_lengths_file(tmp_path, capsys):
    from scripts.bench import epoch as bench_epoch

    (tmp_path / "lengths.tsv").write_text("id\tframes\nLJ1\t300\n")
    expect_error(
        bench_epoch.main,
        ["--lengths", str(tmp_path / "lengths.tsv")],
        capsys,
        f"{tmp_path / 'lengths.tsv'}:1: TSV header has no 'text' column",
        tmp_path / "out",
    )


def test_prepare_ljspeech_without_metadata(tmp_path, capsys):
    from scripts.tools import prepare_ljspeech

    (tmp_path / "LJSpeech-1.1").mkdir()
    expect_error(
        prepare_ljspeech.main,
        ["--ljspeech", str(tmp_path / "LJSpeech-1.1"), "--out", str(tmp_path / "fl")],
        capsys,
        "metadata.csv",
        tmp_path / "fl",
    )


def test_make_tables_without_runs(tmp_path, capsys):
    from scripts.reproduction import make_tables

    expect_error(
        make_tables.main, [str(tmp_path / "runs")], capsys, f"{tmp_path / 'runs'} is not a directory", tmp_path / "runs"
    )


def test_train_py_as_a_user_runs_it(tmp_path):
    done = run_command(sys.executable, "train.py", "--hparams", tiny(tmp_path, "batching=sorted"), expect=None)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.strip().splitlines() == [
        "error: hparam 'batching': 'sorted' is not one of rand, sb, ssb, bkt, ats, stream, bload"
    ]
    assert not (tmp_path / "run").exists()


def test_table2_sh_unknown_experiment(tmp_path):
    done = run_command("scripts/reproduction/table2.sh", "--only", "SSB-FAST", "--out", tmp_path / "runs", expect=None)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "error: unknown experiment(s) SSB-FAST" in done.stderr
    assert not (tmp_path / "runs").exists()


def test_check_shows_what_normalisation_rewrote_and_what_drop_drops(tmp_path, capsys):
    """train.py --check on transcripts as people write them: the lines rewritten, the characters
    dropped (unknown_chars=drop) by line; the default refuses them, naming the line."""
    train_list, val_list, lines = user_corpus(tmp_path / "corpus")
    lines[1] = lines[1].replace("clip number 1.", "Dr. Smith paid $5.50 on 1/2/2020 for 3% & 2nd-rate goods ^_^")
    hp = tiny(tmp_path, write_corpus_lists(train_list, val_list, lines))
    expect_error(
        train.main,
        ["--check", "--hparams", hp],
        capsys,
        f"{train_list}:2: unknown characters '^', '_'",
        tmp_path / "run",
    )
    assert train.main(["--check", "--hparams", hp + ",unknown_chars=drop"]) == 0
    out = capsys.readouterr().out
    assert (
        f"{train_list}:2: 'Dr. Smith paid $5.50 on 1/2/2020 for 3% & 2nd-rate goods ^_^' -> 'doctor smith paid "
        "five dollars, fifty cents on january second, twenty twenty for three percent and second-rate goods ^_^'" in out
    )
    assert f"'^' in 1 line(s): {train_list}:2" in out and f"'_' in 1 line(s): {train_list}:2" in out


def test_check_takes_nvidia_style_lines_and_refuses_arpabet_naming_the_line(tmp_path, capsys):
    """`wav|text` lines (NVIDIA's filelists) are taken, their frames read from the headers; ARPAbet in
    braces is one error naming the file, the line and the braces."""
    train_list, val_list, lines = user_corpus(tmp_path / "corpus")
    hp = tiny(tmp_path, write_corpus_lists(train_list, val_list, [line.rsplit("|", 1)[0] for line in lines]))
    assert train.main(["--check", "--hparams", hp]) == 0
    out = capsys.readouterr().out
    assert f"{train_list}: 4 utterances" in out and "batches per epoch, ZPR" in out
    lines[2] = lines[2].replace("clip number 2.", "turn left on {HH AW1 S T AH0 N} street.")
    write_corpus_lists(train_list, val_list, lines)
    expect_error(
        train.main,
        ["--check", "--hparams", hp],
        capsys,
        f"{train_list}:3: ARPAbet in braces {{HH AW1 S T AH0 N}}",
        tmp_path / "run",
    )


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA")
def test_fused_attention_on_the_cpu(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)  # tests/conftest.py's interpreter would run it
    expect_error(
        train.main,
        ["--hparams", tiny(tmp_path, "fast_decoder=true,model.fused_attention=true,device=cpu")],
        capsys,
        "'model.fused_attention': its Triton kernels run on a CUDA GPU, not on cpu",
        tmp_path / "run",
    )


def test_fused_attention_without_the_fast_decoder(tmp_path, capsys):
    expect_error(
        train.main,
        ["--hparams", tiny(tmp_path, "fast_decoder=false,model.fused_attention=true")],
        capsys,
        "hparam 'model.fused_attention': True needs fast_decoder=true",
        tmp_path / "run",
    )


def test_a_misspelled_hparam_gets_the_nearest_name(tmp_path, capsys):
    expect_error(
        train.main, ["--hparams", tiny(tmp_path, "learnig_rate=0.01")], capsys, "did you mean learning_rate?", tmp_path
    )


def test_a_config_error_names_the_hparam_typed(tmp_path, capsys):
    expect_error(
        train.main,
        ["--hparams", tiny(tmp_path, "batch_size=0")],
        capsys,
        "error: hparam 'batch_size': 0 is invalid",  # not BatchingConfig.batch_size, the class's field
        tmp_path,
    )


def test_an_empty_output_dir_is_refused_and_nothing_is_written(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    expect_error(train.main, ["--hparams", tiny(tmp_path, "output_dir=")], capsys, "'output_dir' is empty", tmp_path)


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA")
def test_check_refuses_a_gpu_this_machine_lacks(tmp_path, capsys, demo_corpus):
    hp = tiny(tmp_path, "device=cuda", demo_corpus)
    expect_error(train.main, ["--check", "--hparams", hp], capsys, "'device': cuda:0 asked for", tmp_path / "run")


def test_resume_of_a_checkpoint_file_says_it_takes_a_folder(stored_run, capsys):
    expect_error(
        train.main,
        ["--resume", str(stored_run / "checkpoint_last.pt")],
        capsys,
        f"error: --resume takes a run folder, not a file: --resume {stored_run} continues the run that wrote "
        f"checkpoint_last.pt; to start a new run from its weights, use --hparams "
        f"init_checkpoint={stored_run / 'checkpoint_last.pt'}",
        stored_run,
    )


def nvidia_statedict(path: Path) -> Path:
    """A tiny model's weights under NVIDIA Tacotron2's names (training/warm_start.py's key map)."""
    from training.warm_start import to_nvidia_key

    model = Tacotron2(resolve_config(load_hparams(tiny(path.parent, "n_frames_per_step=1"))).model)
    torch.save({"state_dict": {to_nvidia_key(k): v for k, v in model.state_dict().items()}}, path)
    return path


def test_init_checkpoint_trained_on_other_mel_features(tmp_path, capsys):
    path = nvidia_statedict(tmp_path / "tacotron2_statedict.pt")
    expect_error(
        train.main,
        ["--check", "--hparams", tiny(tmp_path, f"init_checkpoint={path}")],
        capsys,
        "was trained on other mel features: win_length 1024 (this run: 1103); hop_length 256 (this run: 276); "
        "n_fft 1024 (this run: 2048). Fine-tune on its features with --hparams sample_rate=22050,win_ms=46.44,"
        "hop_ms=11.6,n_fft=1024,n_mels=80,fmin=0,fmax=8000",
        tmp_path / "run",
    )


def test_init_checkpoint_of_this_recipe_with_other_mel_features(tmp_path, capsys, stored_run):
    hp = tiny(tmp_path, f"hop_ms=10,init_checkpoint={stored_run}")
    expect_error(train.main, ["--hparams", hp], capsys, "hop_length 276 (this run: 221)", tmp_path / "run")


def test_init_checkpoint_that_is_no_checkpoint(tmp_path, capsys):
    torch.save({"weights": {}}, tmp_path / "other.pt")
    expect_error(
        train.main,
        ["--hparams", tiny(tmp_path, f"init_checkpoint={tmp_path / 'other.pt'}")],
        capsys,
        "is neither a checkpoint of this recipe (model, hparams, progress) nor an NVIDIA Tacotron2 state dict",
        tmp_path / "run",
    )


def test_init_ignore_that_names_no_layer(tmp_path, capsys):
    path = nvidia_statedict(tmp_path / "tacotron2_statedict.pt")
    hp = tiny(tmp_path, f"init_checkpoint={path},init_mel_check=false,init_ignore=embeding")
    expect_error(
        train.main,
        ["--hparams", hp],
        capsys,
        "'init_ignore': no layer of the model starts with 'embeding'",
        tmp_path / "run",
    )
