"""PlanCutSampler over one-pass and infinite sources (batching/lhotse/stream_sampler.py): a generator of
TextExamples, a CutSet repeated without end, planned a window at a time; every example read
yielded once, never over the budget, equal steps on every rank, resume on a re-iterable stream."""

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("lhotse", reason="lhotse is not installed: pip install 'tacotron2-batching[lhotse]'")
import torch  # noqa: E402
from lhotse import CutSet  # noqa: E402
from lhotse.cut.text import TextExample  # noqa: E402
from lhotse.dataset.sampling.base import TokenConstraint  # noqa: E402
from lhotse.testing.dummies import dummy_cut  # noqa: E402

from batching import BatchingConfig  # noqa: E402
from batching.errors import UserError  # noqa: E402
from batching.lhotse import PlanCutSampler  # noqa: E402
from batching.lhotse.stream_sampler import DEFAULT_WINDOW, StreamCutSampler, is_one_pass, is_stream  # noqa: E402


def text_stream(tokens):
    """A one-pass source: a generator of TextExamples named t<i>, with tokens[i] tokens each."""
    return (TextExample(f"t{i}", np.zeros(int(n), np.int8)) for i, n in enumerate(tokens))


def endless_text(seed: int = 0):
    """An infinite generator of TextExamples of 1-40 tokens, each named by its place."""
    rng = np.random.default_rng(seed)
    return (TextExample(f"t{i}", np.zeros(int(rng.integers(1, 41)), np.int8)) for i in itertools.count())


def repeated_cuts(durations) -> CutSet:
    """A re-iterable infinite source: dummy cuts of `durations`, repeated without end (lazily)."""
    cuts = CutSet.from_cuts(dummy_cut(i, duration=float(d)) for i, d in enumerate(durations))
    return cuts.repeat()


def cost(example, quadratic=None) -> float:
    n = example.num_tokens
    return n + (0 if quadratic is None else n**2 / quadratic)


@settings(max_examples=40, deadline=None)
@given(
    tokens=st.lists(st.integers(1, 40), min_size=1, max_size=90),
    window=st.integers(1, 30),
    world_size=st.integers(1, 3),
    drop_last=st.booleans(),
    quadratic=st.sampled_from([None, 32]),
    shuffle=st.booleans(),
)
def test_a_finite_generator_yields_every_example_once_on_equal_steps_within_the_budget(
    tokens, window, world_size, drop_last, quadratic, shuffle
):
    max_tokens = 2 * (40 + 40**2 // 32)
    constraint = TokenConstraint(max_tokens=max_tokens, quadratic_length=quadratic)
    samplers = [
        PlanCutSampler(
            text_stream(tokens),
            constraint=constraint,
            buffer_size=window,
            drop_last=drop_last,
            shuffle=shuffle,
            rank=r,
            world_size=world_size,
        )
        for r in range(world_size)
    ]
    ranks = [[[e.text for e in batch] for batch in sampler] for sampler in samplers]  # every rank reads the stream
    assert len({len(r) for r in ranks}) == 1  # the same steps on every rank
    taken = [text for r in ranks for batch in r for text in batch]
    discarded = samplers[0].diagnostics.current_epoch_stats.discarded_cuts
    everything = [f"t{i}" for i in range(len(tokens))]
    if len(tokens) >= world_size:  # only a source shorter than the ranks need batches repeats examples
        assert len(taken) == len(set(taken)) and len(taken) + (discarded if drop_last else 0) == len(tokens)
    assert set(taken) <= set(everything) and (drop_last or set(taken) == set(everything))
    for batch in (b for r in ranks for b in r):
        longest = max(cost(TextExample("", np.zeros(tokens[int(t[1:])], np.int8)), quadratic) for t in batch)
        assert len(batch) * longest <= max_tokens  # padding included, as TokenConstraint's exceeded()


@settings(max_examples=15, deadline=None)
@given(window=st.integers(5, 200), world_size=st.integers(1, 3), steps=st.integers(1, 40), seed=st.integers(0, 9))
def test_an_infinite_generator_never_ends_and_never_repeats_or_exceeds_the_budget(window, world_size, steps, seed):
    constraint = TokenConstraint(max_tokens=100)
    ranks = [
        list(
            itertools.islice(
                PlanCutSampler(
                    endless_text(seed), constraint=constraint, buffer_size=window, rank=r, world_size=world_size
                ),
                steps,
            )
        )
        for r in range(world_size)
    ]
    assert [len(r) for r in ranks] == [steps] * world_size
    for step in zip(*ranks):  # each step: the ranks' batches are disjoint
        texts = [e.text for batch in step for e in batch]
        assert len(texts) == len(set(texts))
    taken = [e.text for r in ranks for batch in r for e in batch]
    assert len(taken) == len(set(taken))
    assert all(len(batch) * max(e.num_tokens for e in batch) <= 100 for r in ranks for batch in r)


@settings(max_examples=15, deadline=None)
@given(
    durations=st.lists(st.floats(0.5, 6.0), min_size=1, max_size=12),
    window=st.integers(3, 40),
    world_size=st.integers(1, 3),
    steps=st.integers(1, 25),
)
def test_a_repeated_cutset_on_several_ranks_runs_equal_steps_of_disjoint_cuts_within_the_budget(
    durations, window, world_size, steps
):
    ranks = [
        list(
            itertools.islice(
                PlanCutSampler(
                    repeated_cuts(durations), max_duration=12.0, buffer_size=window, rank=r, world_size=world_size
                ),
                steps,
            )
        )
        for r in range(world_size)
    ]
    assert [len(r) for r in ranks] == [steps] * world_size  # an infinite source never ends
    ids = [cut.id for r in ranks for batch in r for cut in batch]
    assert len(ids) == len(set(ids))  # .repeat() renames each round's cuts; none is yielded twice
    assert all(len(batch) * max(c.duration for c in batch) <= 12.0 + 1e-9 for r in ranks for batch in r)


def counted_text(tokens, read: list):
    """text_stream that appends each example's place to `read` as it is read."""
    for i, n in enumerate(tokens):
        read.append(i)
        yield TextExample(f"t{i}", np.zeros(int(n), np.int8))


def test_two_ranks_read_the_same_windows_and_yield_what_they_read_but_a_bounded_carry():
    """Each window's steps, all ranks together, hold what was read by then except the carried rest
    (at most two batches on two ranks: the incomplete one and the one that cannot fill a step) and
    the look-ahead (one example a rank); nothing twice, everything in the end."""
    tokens = np.random.default_rng(1).integers(10, 41, 200).tolist()
    reads, runs = [[], []], []
    for rank in range(2):
        sampler = PlanCutSampler(
            counted_text(tokens, reads[rank]),
            constraint=TokenConstraint(max_tokens=120),
            buffer_size=40,
            rank=rank,
            world_size=2,
        )
        runs.append([(len(reads[rank]), [int(e.text[1:]) for e in batch]) for batch in sampler])
    assert [read for read, _ in runs[0]] == [read for read, _ in runs[1]]  # the same stream at the same steps
    seen: set[int] = set()
    for (read, mine), (_, theirs), following in itertools.zip_longest(*runs, runs[0][1:], fillvalue=(None, None)):
        assert not seen & set(mine) and not set(mine) & set(theirs)
        seen |= set(mine) | set(theirs)
        if following[0] != read:  # the window's last step: what it read is yielded, but the carry
            assert seen <= set(range(read)) and read - len(seen) <= 2 * 120 // 10 + 2
    assert seen == set(range(200)) and len(runs[0]) > 200 * 10 // 120 / 2


def repeated_sampler(rank: int, world_size: int, window: int):
    durations = np.random.default_rng(2).uniform(0.5, 6.0, 9).tolist()
    return PlanCutSampler(
        repeated_cuts(durations), max_duration=10.0, buffer_size=window, seed=4, rank=rank, world_size=world_size
    )


@settings(max_examples=15, deadline=None)
@given(world_size=st.integers(1, 3), window=st.integers(2, 30), stop=st.integers(0, 19), behind=st.integers(0, 3))
def test_resume_on_a_repeated_cutset_continues_where_it_stopped_on_every_rank(world_size, window, stop, behind):
    """Stopped after `stop` batches, saved with the steps trained (`behind` fewer: prefetched by
    workers), resumed by a new sampler: the rest is the uninterrupted run's, on every rank."""
    done = max(0, stop - behind)
    for rank in range(world_size):
        whole = [[c.id for c in b] for b in itertools.islice(repeated_sampler(rank, world_size, window), 20)]
        first = repeated_sampler(rank, world_size, window)
        for _ in range(stop):
            next(first)
        state = first.state_dict(consumed=done if behind else None)
        resumed = repeated_sampler(rank, world_size, window)
        resumed.load_state_dict(state)
        resumed.set_epoch(0)  # set_epoch of the saved epoch keeps the state (Lhotse's rule)
        rest = [[c.id for c in b] for b in itertools.islice(resumed, 20 - done)]
        assert rest == whole[done:]
        assert behind or resumed.diagnostics.current_epoch_stats.kept_batches == 20


def test_a_one_pass_source_cannot_be_resumed_or_read_twice_with_one_error_each():
    sampler = PlanCutSampler(text_stream([5] * 30), constraint=TokenConstraint(max_tokens=20), buffer_size=8)
    state = sampler.state_dict()
    assert len(list(sampler)) > 0
    with pytest.raises(UserError, match="read to its end"):
        iter(sampler)
    fresh = PlanCutSampler(text_stream([5] * 30), constraint=TokenConstraint(max_tokens=20))
    with pytest.raises(UserError, match="cannot resume a one-pass source"):
        fresh.load_state_dict(state)
    repeated = PlanCutSampler(repeated_cuts([1.0]), max_duration=5.0)
    with pytest.raises(UserError, match=r"not saved by StreamCutSampler \(PlanCutSampler over a one-pass or infinite"):
        repeated.load_state_dict(PlanCutSampler(CutSet.from_cuts([dummy_cut(0)]), max_duration=5.0).state_dict())
    with pytest.raises(UserError, match="saved on 1 ranks, this sampler runs on 2"):
        PlanCutSampler(repeated_cuts([1.0]), max_duration=5.0, world_size=2, rank=0).load_state_dict(
            repeated.state_dict()
        )


def test_a_stream_is_detected_and_the_stream_settings_checked():
    cuts = CutSet.from_cuts([dummy_cut(i) for i in range(4)])
    assert not is_stream(cuts) and not is_stream(list(cuts)) and not is_stream(cuts.repeat(times=2))
    assert is_stream(cuts.repeat()) and not is_one_pass(cuts.repeat())
    assert is_stream(iter(cuts)) and is_one_pass(iter(cuts))
    muxed = CutSet.mux(text_stream([3] * 5), cuts.repeat())  # Lhotse's mixed text and audio source
    assert is_stream(muxed) and is_one_pass(muxed)
    assert type(PlanCutSampler(cuts, max_duration=5.0)) is PlanCutSampler  # the whole-epoch path, as before
    assert isinstance(PlanCutSampler(iter(cuts), max_duration=5.0), StreamCutSampler)
    assert PlanCutSampler(iter(cuts), max_duration=5.0).window == DEFAULT_WINDOW
    with pytest.raises(UserError, match="buffer_size=0 must be a positive integer"):
        PlanCutSampler(cuts.repeat(), max_duration=5.0, buffer_size=0)
    with pytest.raises(UserError, match="2 zipped sources"):
        PlanCutSampler(cuts.repeat(), cuts.repeat(), max_duration=5.0)
    default = PlanCutSampler(cuts.repeat(), max_duration=5.0, buffer_size=3)
    next(default)  # the default's target_zpr calibrates the width on the stream's first window
    assert default.calibration["target"].startswith("target_zpr=paper") and default.calibration["lrf"] is not None
    with pytest.raises(UserError, match="padded strategy"):
        PlanCutSampler(cuts.repeat(), BatchingConfig("bload"))


def test_too_long_examples_in_a_stream_are_refused_by_place_or_skipped_and_counted():
    constraint = TokenConstraint(max_tokens=20)
    with pytest.raises(UserError, match=r"example 12 has 30 tokens, over max_tokens=20"):
        list(PlanCutSampler(text_stream([5] * 12 + [30]), constraint=constraint, buffer_size=5))
    sampler = PlanCutSampler(text_stream([5, 30, 5, 30, 5]), constraint=constraint, buffer_size=2, too_long="skip")
    assert sorted(e.text for b in sampler for e in b) == ["t0", "t2", "t4"] and sampler.skipped == {"too_long": 2}
    alone = PlanCutSampler(text_stream([5, 30, 5]), constraint=constraint, too_long="alone")
    assert sorted(len(b) for b in alone) == [1, 2]
    filtered = PlanCutSampler(text_stream([5] * 10), constraint=constraint, buffer_size=3)
    filtered.filter(lambda e: e.text != "t3")
    assert sum(map(len, filtered)) == 9 and filtered.skipped == {"filter": 1}


class TokenIds(torch.utils.data.Dataset):
    """Lhotse's text test dataset: token ids padded with -1, and their lengths."""

    def __getitem__(self, examples):
        from lhotse.dataset.collation import collate_vectors

        tokens = collate_vectors([e.tokens.astype(np.int32) for e in examples], padding_value=-1)
        return tokens, torch.LongTensor([e.num_tokens for e in examples])


def three_texts():
    """Lhotse's test_text_sampling.py source: three texts, endlessly, tokenized as bytes."""
    while True:
        for item in ("hello world", "example text", "this is my text data"):
            yield TextExample(item, np.frombuffer(item.encode("utf-8"), np.int8))


def test_lhotses_endless_text_source_feeds_a_dataloader_in_full_batches():
    """Lhotse's test_text_sampling.py shapes: its endless source read a window at a time."""
    sampler = PlanCutSampler(three_texts(), constraint=TokenConstraint(max_examples=16), buffer_size=100)
    assert [len(b) for b in itertools.islice(sampler, 12)] == [16] * 12  # carried, never a short batch midway
    loader = torch.utils.data.DataLoader(
        TokenIds(),
        batch_size=None,
        sampler=PlanCutSampler(three_texts(), constraint=TokenConstraint(max_tokens=256), buffer_size=300),
    )
    for tokens, lengths in itertools.islice(loader, 10):
        assert tokens.shape == (len(lengths), int(lengths.max())) and tokens.numel() <= 256
