"""BatchingConfig validation: errors name the field, the bad value and what is allowed."""

import pytest

from batching import BatchingConfig
from batching.errors import UserError


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(batching="random"), r"batching='random' is invalid: expected one of 'rand', 'sb', 'ssb', 'bkt', 'ats'"),
        (dict(batch_size=0), r"batch_size=0 is invalid: expected an integer >= 1"),
        (dict(lrf=-0.1), r"lrf=-0.1 is invalid: expected a finite number >= 0"),
        (dict(n_bins=2.5), r"n_bins=2.5 is invalid"),
        (dict(dbs="yes"), r"dbs='yes' is invalid: expected true or false"),
        (dict(capacity=5000), r"capacity=5000 .* add dbs=true"),
        (
            dict(dbs=True, capacity=0),
            r"capacity=0 is invalid: expected an integer >= 1, or null \(None\) to leave it unset",
        ),
        (dict(batching="stream", max_length=1.5), r"max_length=1.5 is invalid: expected an integer >= 1, or null"),
    ],
)
def test_bad_values_are_named(kwargs, message):
    with pytest.raises(ValueError, match=message):
        BatchingConfig(**kwargs)


def test_from_hparams_coerces_strings():
    config = BatchingConfig.from_hparams("batching=ssb, lrf=0.2,dbs=true,br=1,capacity=20000")
    assert config == BatchingConfig("ssb", lrf=0.2, dbs=True, br=True, capacity=20000)
    assert BatchingConfig.from_dict(config.to_dict()) == config


def test_unknown_keys_are_an_error():
    with pytest.raises(ValueError, match=r"unknown batching option\(s\) bucket: allowed are batching"):
        BatchingConfig.from_dict({"bucket": 3})
    with pytest.raises(ValueError, match=r"batch_size='many' is invalid"):
        BatchingConfig.from_hparams("batch_size=many")
    with pytest.raises(ValueError, match=r"'ssb' is not of the form key=value"):
        BatchingConfig.from_hparams("ssb")


@pytest.mark.parametrize(
    "source, target, dropped",
    [
        (BatchingConfig("stream", max_length=800, capacity=4000), "ssb", {"max_length": None}),
        (BatchingConfig("bload", block_length=900, n_frames_per_step=2), "rand", {"block_length": None}),
        (BatchingConfig("ssb", dbs=True, capacity=4000), "bload", {"capacity": None, "dbs": False}),
        (BatchingConfig("ssb", dbs=True, capacity=4000, lrf=0.3), "stream", {}),
    ],
)
def test_with_strategy_drops_only_what_the_target_does_not_own(source, target, dropped):
    switched = source.with_strategy(target, seed=7)
    assert switched.batching == target and switched.seed == 7
    kept = {k: v for k, v in source.to_dict().items() if k not in {"batching", "seed", *dropped}}
    assert {k: switched.to_dict()[k] for k in kept} == kept
    assert {k: switched.to_dict()[k] for k in dropped} == dropped


def test_with_strategy_to_an_unknown_one_is_a_user_error():
    with pytest.raises(UserError, match=r"batching='sorted' is invalid: expected one of 'rand'"):
        BatchingConfig("ssb").with_strategy("sorted")
