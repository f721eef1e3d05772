"""Speed of data/check.py on an LJSpeech-sized corpus: a cold check (every header read) and a cached rerun.

Targets: 13,100 clips checked cold in under 20 s on a 2-core machine, and in under 1 s from the cache.

The corpus: N clips (default 13,100) with LJSpeech's real lengths and texts, drawn from
../shared/data/ljspeech/lengths.tsv (`samples` and `text` columns; all rows in order when N is
13,100, else drawn with replacement), or uniform 1-10 s and a fixed sentence when that file is absent.
Each clip is a genuine 22,050 Hz mono 16-bit WAV of silence whose data is a hole in a SPARSE file:
a 44-byte header, then the file is extended to its full size with truncate(). The header (all the
check reads) is exactly that of a real clip of that length, but the corpus takes a few MB of disk
instead of ~3.6 GB (on a filesystem without sparse files it does take the full size). The files
were just written, so the page cache is warm: the cold figure does not include disk seeks.

    python -m scripts.bench.check [-n 13100] [--numbers]

--numbers appends a sentence with five numbers to every text, the worst case for the inflect-based
text cleaner (LJSpeech's normalised text has no digits).
"""

from __future__ import annotations

import argparse
import random
import struct
import tempfile
import time
from pathlib import Path

from data.audio import MelConfig, n_frames
from data.check import CheckLimits, check_filelists
from data.filelist import Utterance, split_train_val, write_filelist
from data.shared import LJSPEECH_LENGTHS
from scripts.common import cpu_name


def draw_clips(lengths: Path, n: int, rng: random.Random) -> list[tuple[int, str]]:
    """(n_samples, text) for n clips: LJSpeech's own when lengths.tsv is there, else uniform 1-10 s."""
    if not lengths.is_file():
        return [(rng.randint(22050, 220500), "printing, in the only sense with which we are concerned.")] * n
    with open(lengths, encoding="utf-8") as rows:
        real = [(int(row[1]), row[3]) for row in (line.rstrip("\n").split("\t") for line in list(rows)[1:])]
    return real[:n] if n <= len(real) else rng.choices(real, k=n)


def with_numbers(text: str, rng: random.Random) -> str:
    return (
        f"{text} On the {rng.randint(1, 31)}th of May {rng.randint(1800, 1999)}, he paid "
        f"${rng.randint(1, 999)}.{rng.randint(0, 99):02d} for {rng.randint(1, 100000):,} copies."
    )


def write_sparse_wav(path: Path, n_samples: int, sample_rate: int) -> None:
    """A canonical 44-byte PCM_16 mono header, then a hole for the samples (they read as silence)."""
    data_bytes = 2 * n_samples
    header = struct.pack(
        "<4sI4s4sIHHIIHH4sI",
        b"RIFF",
        36 + data_bytes,
        b"WAVE",
        b"fmt ",
        16,
        1,
        1,
        sample_rate,
        2 * sample_rate,
        2,
        16,
        b"data",
        data_bytes,
    )
    with open(path, "wb") as out:
        out.write(header)
        out.truncate(len(header) + data_bytes)


def make_corpus(root: Path, clips: list[tuple[int, str]], cfg: MelConfig) -> tuple[Path, Path, int]:
    """Write the clips and an 80/20 train/val split; returns both filelists and the longest clip in frames."""
    (root / "wavs").mkdir()
    utterances = []
    for i, (n_samples, text) in enumerate(clips):
        write_sparse_wav(root / "wavs" / f"clip{i:05d}.wav", n_samples, cfg.sample_rate)
        utterances.append(Utterance(Path("wavs") / f"clip{i:05d}.wav", text, n_frames(n_samples, cfg.hop_length)))
    train, val = split_train_val(utterances, 0.2, seed=0)
    write_filelist(root / "train.txt", train)
    write_filelist(root / "val.txt", val)
    return root / "train.txt", root / "val.txt", max(u.frames for u in utterances)


def timed_check(train: Path, val: Path, cfg: MelConfig, limits: CheckLimits, cache: Path) -> tuple[float, object]:
    start = time.perf_counter()
    report = check_filelists(train, val, cfg, limits, cache_dir=cache)
    return time.perf_counter() - start, report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-n", type=int, default=13_100, help="clips in the corpus")
    parser.add_argument("--lengths", type=Path, default=LJSPEECH_LENGTHS, help="LJSpeech lengths.tsv to draw from")
    parser.add_argument("--numbers", action="store_true", help="add five numbers to every text (slow cleaner)")
    args = parser.parse_args()
    cfg, rng = MelConfig(), random.Random(0)
    clips = draw_clips(args.lengths, args.n, rng)
    if args.numbers:
        clips = [(n_samples, with_numbers(text, rng)) for n_samples, text in clips]
    with tempfile.TemporaryDirectory(prefix="bench_check_") as tmp:
        start = time.perf_counter()
        train, val, longest = make_corpus(Path(tmp), clips, cfg)
        made = time.perf_counter() - start
        limits = CheckLimits(16 * longest, f"the DBS capacity of {16 * longest} frames (batch_size 16 x longest)")
        cold, report = timed_check(train, val, cfg, limits, Path(tmp) / "cache")
        cached, again = timed_check(train, val, cfg, limits, Path(tmp) / "cache")
    assert again.from_cache and again.problems == report.problems, "the cached report differs"
    print(f"machine: {cpu_name()}")
    sizes = ", ".join(f"{c.utterances} {Path(c.filelist).stem} / {c.hours:.2f} h" for c in report.counts)
    print(
        f"corpus:  {args.n} clips ({sizes}){' with numbers in every text' if args.numbers else ''}, "
        f"written in {made:.1f} s; {len(report.problems)} problem(s)"
    )
    print("check:   sequential, headers only, page cache warm; cache hit = one stat() per clip")
    print(f"cold:    {cold:6.2f} s  {args.n / cold:9.0f} clips/s")
    print(f"cached:  {cached:6.2f} s  {args.n / cached:9.0f} clips/s")


if __name__ == "__main__":
    main()
