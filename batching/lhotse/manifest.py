"""Lazy JSONL manifests planned in bounded memory: per cut a byte offset and a duration, the cut read
again by seeking (PlanCutSampler, plan_sampler.py).

Lhotse 1.33 reads a lazy manifest only in order; its unreleased 2.0 branch adds `lhotse index`
sidecars of byte offsets into an uncompressed JSONL. This is the same idea on 1.33: one pass over
the manifest keeps each cut's location (an int64: the file's number in the top 16 bits, the byte
offset of its line below) and duration (float64), 16 bytes a cut. A `.jsonl.gz` is decompressed
once into a cache folder; the copy and the index are derived data, kept in the cache folder and
rebuilt whenever the manifest's size or modification time differs from what they were made from.

Indexed: a CutSet read lazily from local JSONL files, nothing over it (`CutSet.from_jsonl_lazy`,
`CutSet.from_file` of `.jsonl` / `.jsonl.gz`, `CutSet.from_files` of those). Anything else (a filter,
map, mux, shuffle or slice over them, a URL, stdin) returns None from `indexed_manifest`, and the
sampler reads it in whole.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import re
import shutil
from array import array
from collections.abc import Iterator
from pathlib import Path

import numpy as np
from lhotse.lazy import LazyIteratorChain, LazyManifestIterator
from lhotse.serialization import deserialize_item

from ..errors import UserError
from .base import log

OFFSET_BITS = 48
MAX_FILES = 2 ** (63 - OFFSET_BITS)
#: A line as Lhotse writes a MonoCut (json.dumps of to_dict): its top-level duration is the third key.
_MONO_CUT = re.compile(rb'\{"id": "(?:[^"\\]|\\.)*", "start": [-+.\deE]+, "duration": ([-+.\deE]+), ')
_MONO_CUT_END = b'"type": "MonoCut"}'


def default_cache() -> Path:
    """Where uncompressed copies and indexes go unless the sampler is given a folder."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "tacotron2-batching" / "manifests"


def manifest_paths(cuts) -> list[Path] | None:
    """The local JSONL files a lazy CutSet reads, when it reads nothing else; else None. Sorted: a
    chain (CutSet.from_files) shuffles its files in place as it is iterated, and the cuts' numbering
    must not depend on that (a state saved by one process is loaded by another)."""
    data = cuts.data
    readers = data.iterators if isinstance(data, LazyIteratorChain) else [data]
    if not readers or len(readers) > MAX_FILES or not all(type(r) is LazyManifestIterator for r in readers):
        return None
    paths = [r.path for r in readers]
    if not all(
        isinstance(p, (str, Path)) and str(p).endswith((".jsonl", ".jsonl.gz")) and os.path.isfile(p) for p in paths
    ):
        return None
    return sorted(Path(p) for p in paths)


class IndexedManifest:
    """The cuts of JSONL manifests as a sequence: len, [i] (one positioned read of its line),
    iteration in file order, and `durations`, all from 16 bytes a cut held in memory. Reads use
    os.pread, which moves no shared file offset: forked DataLoader workers may read at once."""

    def __init__(self, files: list[Path], locations: np.ndarray, durations: np.ndarray, sizes: list[int]) -> None:
        self.files, self.locations, self.durations, self.sizes = files, locations, durations, sizes
        self._descriptors: dict[int, int] = {}

    def __len__(self) -> int:
        return int(self.locations.size)

    def __getitem__(self, index: int):
        index = range(len(self))[index]
        number, offset = divmod(int(self.locations[index]), 2**OFFSET_BITS)
        following = divmod(int(self.locations[index + 1]), 2**OFFSET_BITS) if index + 1 < len(self) else None
        end = following[1] if following and following[0] == number else self.sizes[number]
        return deserialize_item(json.loads(os.pread(self._descriptor(number), end - offset, offset)))

    def __iter__(self) -> Iterator:
        return (self[i] for i in range(len(self)))

    def _descriptor(self, number: int) -> int:
        if number not in self._descriptors:
            path = self.files[number]
            if path.stat().st_size != self.sizes[number]:
                raise UserError(
                    f"{path} changed while a sampler was reading it ({self.sizes[number]} bytes when "
                    f"indexed, {path.stat().st_size} now): build the sampler again"
                )
            self._descriptors[number] = os.open(path, os.O_RDONLY)
        return self._descriptors[number]

    def __getstate__(self) -> dict:
        """For DataLoader workers (pickled): every process opens its own files."""
        return dict(self.__dict__, _descriptors={})

    def __del__(self) -> None:
        for descriptor in self._descriptors.values():
            os.close(descriptor)


def cut_source(cuts, cache: Path | None):
    """What PlanCutSampler plans over: an eager CutSet's cuts; a lazy one's index (indexed_manifest)
    or, when it cannot be indexed, its cuts read into memory, logged."""
    if not cuts.is_lazy:
        return list(cuts)
    index = indexed_manifest(cuts, cache)
    if index is None:
        log.info(
            "PlanCutSampler: reading a lazy CutSet into memory (metadata only) to plan from it: only a lazy "
            "reader of local JSONL files with nothing over it is indexed in bounded memory, this one is %s",
            type(cuts.data).__name__,
        )
        return list(cuts)
    return index


def indexed_manifest(cuts, cache: Path | None) -> IndexedManifest | None:
    """The index of a lazy CutSet read from local JSONL files (see manifest_paths), made or reused
    in `cache` (default_cache() when None); None for any other CutSet."""
    paths = manifest_paths(cuts)
    if paths is None:
        return None
    cache = Path(cache) if cache is not None else default_cache()
    cache.mkdir(parents=True, exist_ok=True)
    files, locations, durations, sizes = [], [], [], []
    for number, path in enumerate(paths):
        readable, offsets, seconds = _file_index(path, cache)
        files.append(readable)
        sizes.append(readable.stat().st_size)
        locations.append(offsets | np.int64(number) << np.int64(OFFSET_BITS) if number else offsets)
        durations.append(seconds)
    if len(paths) == 1:
        return IndexedManifest(files, locations[0], durations[0], sizes)
    return IndexedManifest(files, np.concatenate(locations), np.concatenate(durations), sizes)


def _file_index(path: Path, cache: Path) -> tuple[Path, np.ndarray, np.ndarray]:
    """(the uncompressed file to seek in, its cuts' byte offsets, their durations), from the cache
    when it was made from this very manifest (same path, size and modification time), else anew."""
    source = path.resolve()
    stat = source.stat()
    key = hashlib.sha256(str(source).encode()).hexdigest()[:16]
    compressed = source.name.endswith(".gz")
    readable = cache / f"{key}-{source.name.removesuffix('.gz')}" if compressed else source
    index_path = cache / f"{key}-{source.name}.index.npz"
    signature = [stat.st_size, stat.st_mtime_ns]
    if index_path.is_file() and readable.is_file():
        with np.load(index_path) as index:
            if index["signature"].tolist() == signature + [readable.stat().st_size]:
                return readable, index["offsets"], index["durations"]
    if compressed:
        _decompress(source, readable)
    offsets, durations = _scan(readable, source)
    partial = index_path.with_name(f"{index_path.name}.{os.getpid()}.tmp.npz")
    np.savez(
        partial,
        offsets=offsets,
        durations=durations,
        signature=np.array(signature + [readable.stat().st_size], np.int64),
    )
    os.replace(partial, index_path)
    return readable, offsets, durations


def _decompress(source: Path, target: Path) -> None:
    """Write source's uncompressed copy at target (atomically: ranks sharing a cache may race)."""
    partial = target.with_name(f"{target.name}.{os.getpid()}.tmp")
    with gzip.open(source, "rb") as compressed, open(partial, "wb") as plain:
        shutil.copyfileobj(compressed, plain, 1 << 22)
    os.replace(partial, target)


def _scan(path: Path, source: Path) -> tuple[np.ndarray, np.ndarray]:
    """One pass over an uncompressed JSONL manifest (source's copy): each cut's byte offset and duration."""
    offsets, durations = array("q"), array("d")
    position = 0
    with open(path, "rb") as lines:
        for number, line in enumerate(lines, 1):
            offsets.append(position)
            durations.append(line_duration(line, source, number))
            position += len(line)
    return np.frombuffer(offsets, np.int64), np.frombuffer(durations, np.float64)


def line_duration(line: bytes, path: Path, number: int) -> float:
    """A manifest line's cut duration: read off the line for a MonoCut as Lhotse writes it, else
    from the deserialised cut (e.g. a MixedCut's, computed from its tracks)."""
    found = _MONO_CUT.match(line)
    if found and line.rstrip().endswith(_MONO_CUT_END):
        return float(found[1])
    try:
        return float(deserialize_item(json.loads(line)).duration)
    except (ValueError, KeyError, TypeError, AttributeError) as err:
        raise UserError(
            f"{path}:{number} is not a Lhotse cut ({type(err).__name__}: {err}): fix or regenerate the manifest"
        ) from None
