"""The lesson's model and hardware dicts: from the spec tables, at random, and as a
message shows them."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ... import specs
from ..convert import _show

#: The keys of a model dict in the notebook, and of a hardware dict.
MODEL_KEYS = ("name", "params", "layers", "kv_heads", "head_dim", "bytes_per_param")
HARDWARE_KEYS = ("name", "bandwidth", "peak_flops")


def model_dict(spec: Mapping[str, Any]) -> dict[str, Any]:
    """A fresh plain dict with the notebook's model keys, from a spec mapping.

    Examples
    --------
    >>> model_dict(specs.LLAMA2_70B)["kv_heads"]
    8
    """
    return {key: spec[key] for key in MODEL_KEYS}


def hardware_dict(spec: Mapping[str, Any]) -> dict[str, Any]:
    """A fresh plain dict with the notebook's hardware keys.

    Examples
    --------
    >>> hardware_dict(specs.A100_SXM_80GB)["bandwidth"]
    2039000000000.0
    """
    return {key: spec[key] for key in HARDWARE_KEYS}


def real_pairs() -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """Every (model, hardware) pair of the lesson's tables, as fresh dicts."""
    return [(model_dict(m), hardware_dict(h)) for m in specs.MODELS for h in specs.HARDWARE]


def _log_uniform(rng: np.random.Generator, low: float, high: float) -> float:
    return float(math.exp(rng.uniform(math.log(low), math.log(high))))


def random_model(rng: np.random.Generator) -> dict[str, Any]:
    """A random dense model: 0.1 to 500 billion parameters, 1, 2 or 4 bytes each."""
    heads = int(rng.choice([1, 2, 4, 8, 16, 32, 64]))
    return {
        "name": "a random model",
        "params": int(_log_uniform(rng, 1e8, 5e11)),
        "layers": int(rng.integers(4, 129)),
        "kv_heads": heads,
        "head_dim": int(rng.choice([64, 80, 128, 256])),
        "bytes_per_param": int(rng.choice([1, 2, 4])),
    }


def random_hardware(rng: np.random.Generator) -> dict[str, Any]:
    """Random ceilings: 20 GB/s to 10 TB/s, 0.05 to 3000 TFLOP/s."""
    return {
        "name": "random hardware",
        "bandwidth": _log_uniform(rng, 2e10, 1e13),
        "peak_flops": _log_uniform(rng, 5e10, 3e15),
    }


def random_pairs(seed: int, n: int) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """``n`` random (model, hardware) pairs from ``np.random.default_rng(seed)``."""
    rng = np.random.default_rng(seed)
    return [(random_model(rng), random_hardware(rng)) for _ in range(n)]


_NAMED = {spec["name"] for spec in (*specs.MODELS, *specs.HARDWARE)}


def _label(config: Mapping[str, Any], keys: Sequence[str]) -> str:
    """How a model or hardware dict is shown in a message: its name, or its numbers."""
    if config.get("name") in _NAMED:
        return str(config["name"])
    shown = {k: config[k] for k in keys if k != "name"}
    return _show(shown, limit=200)


def _m(model: Mapping[str, Any]) -> str:
    return _label(model, MODEL_KEYS)


def _h(hardware: Mapping[str, Any]) -> str:
    return _label(hardware, HARDWARE_KEYS)
