"""Part 1 and *Check your understanding*: the answers worked by hand, for the learner's numbers.

Each check takes the learner's own ``numbers`` (a row of
:data:`specdec_reference.variants.E7_1`, from :func:`specdec_reference.variants.graded_numbers`)
and names the mistake a wrong answer matches.  Expected values come from
:mod:`specdec_reference.roofline` on the figures of :mod:`specdec_reference.specs`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from specdec_reference import roofline, specs
from specdec_reference import testing as checks

#: Part 1's times are graded within this many milliseconds, the intensity within 0.05
#: FLOP/byte (the lesson says so).
MS_TOLERANCE = 0.1
INTENSITY_TOLERANCE = 0.05
#: The models the lesson names by their nominal size, for the rounded-figures mistake.
_NOMINAL = {"Llama-2-7B": 7e9, "Llama-2-70B": 70e9}


def _spec(table, name: str) -> Mapping[str, Any]:
    return next(entry for entry in table if entry["name"] == name)


def part1_pair(numbers: Mapping[str, Any]) -> tuple[Mapping[str, Any], Mapping[str, Any]]:
    """The model and the hardware of the learner's Part 1."""
    return _spec(specs.MODELS, numbers["model"]), _spec(specs.HARDWARE, numbers["hardware"])


def _ms(model, hardware, positions: int) -> float:
    return roofline.step_time(model, hardware, positions, 0)[0] * 1e3


def _compute_ms(model, hardware, positions: int) -> float:
    return positions * roofline.flops_per_token(model["params"]) / hardware["peak_flops"] * 1e3


def part1_answers(numbers: Mapping[str, Any]) -> dict[str, float]:
    """Part 1's three answers for the learner's numbers."""
    model, hardware = part1_pair(numbers)
    return {
        "answer_ms_per_token": _ms(model, hardware, 1),
        "answer_intensity": roofline.arithmetic_intensity(model, 1, 0),
        "answer_verify_ms": _ms(model, hardware, numbers["k"] + 1),
    }


def _near(value: float, tolerance: float):
    return lambda v: abs(v - value) < tolerance


def check_part1(namespace: Mapping[str, Any], which: str, numbers: Mapping[str, Any]) -> None:
    """Fail unless Part 1's ``which`` (``answer_ms_per_token``, ``answer_intensity``,
    ``answer_verify_ms``) is right for the learner's numbers, naming the mistake it matches."""
    value = checks.require_defined(namespace, which, "the Part 1 cell")
    model, hardware = part1_pair(numbers)
    where = f"{model['name']}, {hardware['name']}"
    want = part1_answers(numbers)[which]
    one = _ms(model, hardware, 1)
    if which == "answer_ms_per_token":
        gigabytes = roofline.weight_bytes(model["params"], model["bytes_per_param"]) / 1e9
        nominal = _NOMINAL[model["name"]] * model["bytes_per_param"]
        rounded_bandwidth = float(f"{hardware['bandwidth']:.1g}")
        mistakes = {
            "bits where bytes are meant": (
                _near(8 * want, 0.5),
                f"16-bit weights take 2 bytes each, {gigabytes:.1f} GB in all",
            ),
            "the compute time, which the step does not wait for": (
                _near(_compute_ms(model, hardware, 1), 0.005),
                f"reading {gigabytes:.1f} GB takes far longer than the arithmetic: the step is "
                "memory-bound",
            ),
            "seconds instead of milliseconds": (
                _near(want / 1e3, 5e-5),
                "multiply the seconds by 1000",
            ),
            f"rounded figures ({nominal / 1e9:g} GB over {rounded_bandwidth / 1e12:g} TB/s)": (
                _near(nominal / rounded_bandwidth * 1e3, 0.02),
                f"use {model['params'] / 1e9:.2f}e9 parameters and "
                f"{hardware['bandwidth'] / 1e12:g} TB/s",
            ),
        }
        call, tolerance = f"answer_ms_per_token ({where}, batch 1)", MS_TOLERANCE
    elif which == "answer_intensity":
        ridge = hardware["peak_flops"] / hardware["bandwidth"]
        mistakes = {
            "one FLOP per parameter instead of two": (
                0.5 * want,
                "each weight takes a multiply and an add",
            ),
            "bits where bytes are meant": (want / 8, "divide by bytes: 2 per 16-bit weight"),
            "FLOPs per parameter, not per byte": (
                2.0,
                "divide by the bytes read, 2 per parameter",
            ),
            f"the {hardware['name']}'s ridge, not the step's intensity": (
                _near(ridge, 3.0),
                "the ridge is the hardware's FLOPs per byte; the step's is its own FLOPs over "
                "its own bytes",
            ),
        }
        call, tolerance = f"answer_intensity ({model['name']}, batch 1)", INTENSITY_TOLERANCE
    else:
        positions = numbers["k"] + 1
        compute = _compute_ms(model, hardware, positions)
        mistakes = {
            f"{positions} full steps, as if each position read the weights again": (
                _near(positions * one, 0.5),
                f"one pass reads the weights once for all {positions} positions",
            ),
            f"{positions - 1} full steps": (
                _near((positions - 1) * one, 0.5),
                "and one pass reads the weights once",
            ),
            "the sum of the memory time and the compute time": (
                _near(one + compute, 0.02),
                "the reads and the arithmetic overlap: take the larger of the two",
            ),
            f"the compute time of {positions} positions alone": (
                _near(compute, 0.02),
                f"{positions} positions are still below the ridge: the step waits for memory",
            ),
            "seconds instead of milliseconds": (
                _near(want / 1e3, 5e-5),
                "multiply the seconds by 1000",
            ),
        }
        call = f"answer_verify_ms ({where}, {positions} positions)"
        tolerance = MS_TOLERANCE
    checks.check_close(value, want, call=call, verb="is", atol=tolerance, rtol=0, mistakes=mistakes)


def choice_kinds(numbers: Mapping[str, Any]) -> dict[str, str]:
    """The letters of *Check your understanding* and the kind of answer each offers:
    ``weights`` (the ridge of the weights alone), ``right``, ``ridge`` (the ridge batch
    less one), ``none``."""
    return dict(zip("ABCD", numbers["options"].split(), strict=True))


def check_choice(namespace: Mapping[str, Any], numbers: Mapping[str, Any]) -> None:
    """Fail unless ``choice`` is the letter of the smallest compute-bound k among the
    learner's options, naming the mistake behind a wrong letter."""
    kinds = choice_kinds(numbers)
    got = checks.chosen_letter(namespace, "".join(kinds))
    want = next(letter for letter, kind in kinds.items() if kind == "right")
    if got == want:
        return
    model = specs.LLAMA2_7B
    hardware = _spec(specs.HARDWARE, numbers["cu_hardware"])
    n, seq_len, k = numbers["sequences"], numbers["seq_len"], numbers["offers"][want]
    weights = roofline.weight_bytes(model["params"], model["bytes_per_param"])
    caches = roofline.model_cache_bytes(model, seq_len, n)
    reads_ms = (weights + caches) / hardware["bandwidth"] * 1e3
    per_n_ms = _compute_ms(model, hardware, n)
    gflop = roofline.flops_per_token(model["params"]) / 1e9
    why = {
        "weights": (
            f"that is the ridge of the weights alone. The {n} caches add {caches / 1e9:.1f} GB "
            f"to the {weights / 1e9:.1f} GB of weights, so the pass reads "
            f"{(weights + caches) / 1e9:.1f} GB ({reads_ms:.1f} ms) whatever k is"
        ),
        "ridge": (
            f"the ridge batch counts positions, and the pass has {n} (k + 1) of them; besides, "
            f"the caches add {caches / 1e9:.1f} GB to the reads"
        ),
        "none": (
            f"the reads do not grow with k but the arithmetic does: {n} (k + 1) positions at "
            f"{per_n_ms:.3g} ms per {n} pass the {reads_ms:.1f} ms of reads once k + 1 > "
            f"{reads_ms / per_n_ms:.1f}"
        ),
    }
    raise AssertionError(
        f'choice is "{got}", expected "{want}" (k = {k}): {why[kinds[got]]}. The pass reads '
        f"{(weights + caches) / 1e9:.1f} GB ({reads_ms:.1f} ms at "
        f"{hardware['bandwidth'] / 1e12:g} TB/s) and does {n} (k + 1) x {gflop:.1f} GFLOP "
        f"({per_n_ms:.3g} ms per {n} positions at {hardware['peak_flops'] / 1e12:g} TFLOP/s), "
        f"so it turns compute-bound at k + 1 = {k + 1}."
    )
