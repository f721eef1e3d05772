"""Lhotse samplers over the planner: `CutSet` mini-batches planned by any padded strategy.

Lhotse-based stacks (Lhotse, icefall, NeMo's Lhotse loader) take a sampler that yields `CutSet`s
and a dataset that turns a `CutSet` into tensors (`DataLoader(dataset, sampler=..., batch_size=None)`).
The samplers here are Lhotse `CutSampler`s built on one base (base.py, in the manner of Lhotse's
own: the base does `__next__`, filter and map, diagnostics, dataloading info, the `_dup<k>` renaming,
the state envelope and pickling), each writing its batch source only:

- PlanCutSampler (plan_sampler.py): an epoch planned whole by the planner; a lazy JSONL manifest is indexed
  in bounded memory (manifest.py). It takes Lhotse's constructor (settings.py, measure.py).
- StreamCutSampler (stream_sampler.py): what PlanCutSampler(...) returns for a one-pass or infinite source
  (a generator, `.repeat()`), planned a window at a time.
- SharCutSampler (shar_sampler.py): a CutSet read from Shar shards, through the streaming strategy.
- cut_batch_loader (loader.py): a DataLoader with the sampler as its batch sampler, which Hugging Face
  Accelerate can prepare (then pass it to batching.accelerate_shard.shard_aware).

docs/lhotse.md says how to use them and where they differ from Lhotse's.
Needs `pip install 'tacotron2-batching[lhotse]'`; nothing else in `batching` imports this package.
"""

from .loader import cut_batch_loader
from .plan_sampler import PlanCutSampler
from .shar_sampler import SharCutSampler
from .stream_sampler import StreamCutSampler

__all__ = ["PlanCutSampler", "SharCutSampler", "StreamCutSampler", "cut_batch_loader"]
