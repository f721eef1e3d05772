"""The resume matrix (docs/engines.md, "Resume across ranks and workers"): an epoch stopped mid-way
at 2 ranks x 2 DataLoader workers and resumed at 1 x 8, 4 x 1 and 2 x 2, for PlanBatchSampler (a
padded strategy and batching=stream), PlanCutSampler, the Lhotse stream sampler and SharCutSampler.

Ranks are the samplers built with rank and world_size, in-process. Workers are what the code makes
of them: the sampler runs in the loader's main process and the workers only load, so at the stop
each rank's sampler has drawn workers x prefetch_factor batches beyond the steps trained, and the
state is saved with the steps trained (state_dict(consumed=steps), what torchdata's loader state
and the recipe's loop record). Every new rank loads rank 0's state, as Lightning's checkpoint
(written by rank 0) gives it. Exact: every remaining utterance once, none of the trained ones again,
equal steps on the new ranks, and len() the epoch's steps (Lightning counts the restored steps
against it); where that cannot be, one error."""

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from batching import BatchingConfig
from batching.errors import UserError

torch = pytest.importorskip("torch")
pytest.importorskip("lhotse", reason="lhotse is not installed: pip install 'tacotron2-batching[lhotse]'")
from lhotse import CutSet  # noqa: E402
from lhotse.testing.dummies import dummy_cut  # noqa: E402

from batching.lhotse import PlanCutSampler, SharCutSampler  # noqa: E402
from batching.sampler import PlanBatchSampler  # noqa: E402

STOP = (2, 2)  # (ranks, workers) of the stopped run
TARGETS = [(1, 8), (4, 1), (2, 2)]  # (ranks, workers) of the resumed one; 2 x 2 is the control
PREFETCH = 2  # torch's DataLoader prefetch_factor: batches each worker draws ahead of training
LENGTHS = np.random.default_rng(11).integers(20, 800, 300)
DURATIONS = np.random.default_rng(12).uniform(0.5, 4.0, 120).round(2)
CUTS = CutSet.from_cuts(dummy_cut(i, duration=float(d), recording_duration=float(d)) for i, d in enumerate(DURATIONS))

MAKERS = {
    "PlanBatchSampler ssb-dbs-br": lambda rank, ranks: PlanBatchSampler(
        LENGTHS, BatchingConfig("ssb", dbs=True, br=True, capacity=4000, seed=3), rank, ranks
    ),
    "PlanBatchSampler stream": lambda rank, ranks: PlanBatchSampler(
        LENGTHS, BatchingConfig("stream", bucket_interval=100, capacity=4000, br=True, seed=3), rank, ranks
    ),
    "PlanCutSampler": lambda rank, ranks: PlanCutSampler(CUTS, max_duration=8.0, seed=3, rank=rank, world_size=ranks),
}


def items(batch) -> list:
    """A batch's utterances: sample indices, or cut ids."""
    return list(batch) if isinstance(batch, list) else [cut.id for cut in batch]


def stopped(make, steps: int, epoch: int = 1) -> tuple[list, dict]:
    """What STOP's ranks trained in their first `steps` steps of `epoch` (their samplers drawn
    workers x PREFETCH batches further), and rank 0's state saved with the steps trained."""
    ranks, workers = STOP
    trained, state = [], None
    for rank in range(ranks):
        sampler = make(rank, ranks)
        sampler.set_epoch(epoch)
        drawn = list(itertools.islice(iter(sampler), steps + workers * PREFETCH))
        trained += [items(batch) for batch in drawn[:steps]]
        state = state or sampler.state_dict(consumed=steps)
    return trained, state


def resumed(make, state: dict, ranks: int, epoch: int = 1) -> list[list]:
    """Each new rank's batches after loading `state` (set_epoch of the saved epoch keeps it)."""
    out = []
    for rank in range(ranks):
        sampler = make(rank, ranks)
        sampler.load_state_dict(state)
        sampler.set_epoch(epoch)
        steps_before = len(sampler)
        out.append([items(batch) for batch in sampler])
        assert steps_before - state["consumed"] - sum(c for _, c in state["history"]) == len(out[-1])
    return out


@pytest.mark.parametrize("target", TARGETS, ids=lambda t: f"{t[0]}x{t[1]}")
@pytest.mark.parametrize("name", list(MAKERS))
def test_a_planned_epoch_resumes_exactly_on_any_ranks_and_workers(name, target):
    make = MAKERS[name]
    steps = len(make(0, STOP[0])) // 2
    trained, state = stopped(make, steps)
    rest = resumed(make, state, target[0])
    assert len({len(r) for r in rest}) == 1 and all(rest)  # equal steps on the new ranks
    everything = [i for batch in trained + [b for r in rest for b in r] for i in batch]
    whole = sorted(CUTS.ids) if name == "PlanCutSampler" else list(range(LENGTHS.size))
    assert sorted(everything) == whole  # every remaining one once, none trained again


@settings(max_examples=12, deadline=None)
@given(steps=st.integers(0, 7), target=st.sampled_from(TARGETS), epoch=st.integers(0, 3))
def test_the_cut_sampler_resumes_exactly_from_any_step(steps, target, epoch):
    make = MAKERS["PlanCutSampler"]
    trained, state = stopped(make, steps, epoch)
    rest = resumed(make, state, target[0], epoch)
    assert len({len(r) for r in rest}) == 1
    assert sorted(i for batch in trained + [b for r in rest for b in r] for i in batch) == sorted(CUTS.ids)


@pytest.mark.filterwarnings("ignore:This DataLoader will create")  # 8 workers on a small machine
def test_the_matrix_with_real_dataloader_workers_matches_the_simulation():
    """The simulation's premise, with torch's DataLoader: 2 workers draw 4 batches ahead; the state
    saved with the steps trained resumes in a loader of 8 workers exactly."""
    make = MAKERS["PlanBatchSampler ssb-dbs-br"]
    sampler = make(0, 1)
    loader = torch.utils.data.DataLoader(torch.arange(LENGTHS.size), batch_sampler=sampler, num_workers=2)
    iterator = iter(loader)
    trained = [next(iterator).tolist() for _ in range(3)]
    assert sampler.state_dict()["consumed"] == 3 + 2 * PREFETCH  # the workers' prefetch, as simulated
    state = sampler.state_dict(consumed=3)
    del iterator
    again = make(0, 1)
    again.load_state_dict(state)
    rest = [
        b.tolist() for b in torch.utils.data.DataLoader(torch.arange(LENGTHS.size), batch_sampler=again, num_workers=8)
    ]
    assert sorted(i for b in trained + rest for i in b) == list(range(LENGTHS.size))


def repeated_sampler(rank: int, ranks: int):
    """The Lhotse stream sampler over a re-iterable endless source (CutSet.repeat())."""
    return PlanCutSampler(
        CUTS.subset(first=30).repeat(), max_duration=8.0, buffer_size=16, seed=3, rank=rank, world_size=ranks
    )


@pytest.mark.parametrize("target", TARGETS, ids=lambda t: f"{t[0]}x{t[1]}")
def test_a_stream_resumes_on_its_own_ranks_and_refuses_others_with_one_error(target):
    """Every window is planned for all ranks: on 2 ranks the stream goes on as the uninterrupted run,
    on 1 or 4 one error (no silent loss)."""
    steps, more = 5, 6
    ranks, workers = STOP
    whole = [[items(b) for b in itertools.islice(repeated_sampler(r, ranks), steps + more)] for r in range(ranks)]
    first = repeated_sampler(0, ranks)
    list(itertools.islice(first, steps + workers * PREFETCH))
    state = first.state_dict(consumed=steps)
    if target[0] != ranks:
        with pytest.raises(UserError, match=f"saved on {ranks} ranks, this sampler runs on {target[0]}"):
            repeated_sampler(0, target[0]).load_state_dict(state)
        return
    for rank in range(ranks):
        again = repeated_sampler(rank, ranks)
        again.load_state_dict(state)
        assert [items(b) for b in itertools.islice(again, more)] == whole[rank][steps:]


def test_a_one_pass_stream_refuses_any_resume_with_one_error():
    sampler = PlanCutSampler(iter(CUTS.subset(first=30)), max_duration=8.0, buffer_size=16)
    list(itertools.islice(sampler, 2))
    with pytest.raises(UserError, match="cannot resume a one-pass source"):
        PlanCutSampler(iter(CUTS.subset(first=30)), max_duration=8.0).load_state_dict(sampler.state_dict(consumed=1))


@pytest.mark.parametrize("target", TARGETS, ids=lambda t: f"{t[0]}x{t[1]}")
def test_shar_resumes_on_its_own_ranks_and_refuses_others_with_one_error(tmp_path, target):
    CUTS.subset(first=40).drop_features().to_shar(tmp_path, fields={}, shard_size=5)

    def make(rank, ranks):
        return SharCutSampler(CutSet.from_shar(in_dir=tmp_path), max_duration=8.0, seed=3, rank=rank, world_size=ranks)

    ranks = STOP[0]
    steps = len(make(0, ranks)) // 2
    trained, state = stopped(make, steps)
    if target[0] != ranks:
        with pytest.raises(UserError, match="resume with the same shards, ranks"):
            make(0, target[0]).load_state_dict(state)
        return
    rest = []
    for rank in range(ranks):  # Shar's state is each rank's own (where its shards resume)
        mine = make(rank, ranks)
        mine.set_epoch(1)
        list(itertools.islice(iter(mine), steps))
        again = make(rank, ranks)
        again.load_state_dict(mine.state_dict())
        again.set_epoch(1)
        rest += [items(b) for b in again]
    assert sorted(i for b in trained + rest for i in b) == sorted(CUTS.subset(first=40).ids)


def test_torchdata_refuses_a_loader_state_of_another_worker_count():
    """docs/engines.md's matrix: through the loader's state (Lightning's checkpoint) the worker count
    must stay; torchdata refuses another when the state is loaded."""
    pytest.importorskip("torchdata.stateful_dataloader", reason="pip install torchdata (requirements-dev.txt)")
    from torchdata.stateful_dataloader import StatefulDataLoader

    def loader(workers):
        return StatefulDataLoader(
            torch.arange(40),
            batch_sampler=PlanBatchSampler(np.arange(1, 41), BatchingConfig("sb", batch_size=4)),
            num_workers=workers,
        )

    first = loader(2)
    iterator = iter(first)
    [next(iterator) for _ in range(2)]
    state = first.state_dict()
    other = loader(1)
    other.load_state_dict(state)
    with pytest.raises(AssertionError):
        iter(other)


@pytest.mark.parametrize("name", list(MAKERS))
def test_loading_a_state_leaves_it_as_given(name):
    """Every new rank loads the one state (Lhotse's diagnostics once emptied the dict they loaded)."""
    import copy

    _, state = stopped(MAKERS[name], 2)
    given = copy.deepcopy(state)
    MAKERS[name](0, 4).load_state_dict(state)
    assert state == given
