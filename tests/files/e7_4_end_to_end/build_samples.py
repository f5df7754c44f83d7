"""Regenerate the sample submissions of lesson E7.4 from the release notebook.

The scenarios are below; the engine that turns them into notebooks is
``tests/files/sample_builder.py`` (shared by every lesson).  ``reference`` is the source
notebook's own solutions, ``blank`` the release unchanged, and every other scenario starts
from the reference and replaces the solution cells it lists.  ``expected.json`` beside
this script gives each scenario's expected score on every test cell.

Usage (from the repository root)::

    python tests/files/e7_4_end_to_end/build_samples.py            # write
    python tests/files/e7_4_end_to_end/build_samples.py --check    # compare, exit 1 if stale
"""

from __future__ import annotations

import sys
from pathlib import Path

# A verify step written into speculative_decode by the learner, with one line that the
# mistakes below change (resample from p, no bonus token).
_OWN_LOOP = """
out, stats = [], []
while len(out) < n:
    context = list(prompt) + out
    drafted, q = draft(draft_model, context, k, rng, temperature)
    p = with_temperature(target_model.probs_along(context, drafted), temperature)
    emitted, accepted = [], 0
    for i, x in enumerate(drafted):
        if rng.random() < min(1.0, p[i, x] / q[i, x]):
            emitted.append(x)
            accepted += 1
            continue
        RESAMPLE
        break
    else:
        BONUS
    out.extend(emitted)
    stats.append((k, accepted, len(emitted)))
return out[:n], stats
"""
_RESIDUAL = """residual = np.maximum(0.0, p[i] - q[i])
        emitted.append(int(rng.choice(len(residual), p=residual / residual.sum())))"""
_BONUS = "emitted.append(int(rng.choice(p.shape[1], p=p[k])))"


def _own_loop(resample: str = _RESIDUAL, bonus: str = _BONUS) -> str:
    return _OWN_LOOP.replace("RESAMPLE", resample).replace("BONUS", bonus)


# speculative_decode_cached as the docstring says, with its rollback (and anything done
# before a pass) as lines that the mistakes below change.
_CACHED_LOOP = """
text, stats = list(prompt), []
while len(text) - len(prompt) < n:
    BEFORE
    row = draft_model.forward(text[len(draft_model.cache):])[-1]
    drafted, q = [], []
    for i in range(k):
        q.append(with_temperature(row, temperature))
        drafted.append(int(rng.choice(len(q[-1]), p=q[-1])))
        if i < k - 1:
            row = draft_model.forward(drafted[-1:])[-1]
    scored = target.forward(text[len(target.cache):] + drafted)[-(k + 1):]
    emitted = verify(with_temperature(scored, temperature), np.array(q), drafted, rng)
    text += emitted
    ROLLBACK
    stats.append((k, len(emitted) - 1, len(emitted)))
return text[len(prompt) : len(prompt) + n], stats
"""


def cached_loop(rollback: list[str], before: list[str] = ()) -> str:
    """The cached decoder with these rollback lines (and lines run before each pass)."""

    def block(code: list[str] | tuple[str, ...]) -> str:
        return "".join(f"    {line}\n" for line in code)

    return _CACHED_LOOP.replace("    BEFORE\n", block(before)).replace(
        "    ROLLBACK\n", block(rollback)
    )


#: The docstring's rollback: both caches keep every emitted token but the last.
ROLLBACK = ["target.cache.truncate(len(text) - 1)", "draft_model.cache.truncate(len(text) - 1)"]


SCENARIOS: dict[str, dict[str, str]] = {
    "reference": {},
    "blank": {},
    # --- correct solutions written differently: full marks -------------------------
    # Plain Python lists and loops, the learner's own verify inside the decoder, the
    # closed form with its limit, a list-based best_k.
    "variant-python-loops": {
        "with_temperature": """
            import math

            def one(row):
                row = [float(x) for x in row]
                if temperature == 0:
                    top = row.index(max(row))
                    return [1.0 if i == top else 0.0 for i in range(len(row))]
                logs = [math.log(x) if x > 0 else -math.inf for x in row]
                top = max(logs)
                weights = [math.exp((z - top) / temperature) for z in logs]
                return [w / sum(weights) for w in weights]

            rows = [list(r) for r in np.asarray(probs, dtype=float).reshape(-1, np.shape(probs)[-1])]
            return np.array([one(r) for r in rows]).reshape(np.shape(probs))
            """,
        "draft": """
            tokens, rows = [], []
            for _ in range(k):
                q = with_temperature(draft_model.probs(list(context) + tokens), temperature)
                tokens.append(int(rng.choice(len(q), p=q)))
                rows.append(list(q))
            return tokens, rows
            """,
        # Its own draft hands back lists, so it indexes q (and p) row by row.
        "speculative_decode": _own_loop()
        .replace("p[i, x] / q[i, x]", "p[i][x] / q[i][x]")
        .replace("p[i] - q[i]", "p[i] - np.asarray(q[i])"),
        "measured_alpha": """
            accepted = tested = 0
            for drafted, a, emitted in stats:
                accepted += a
                tested += a + (1 if a < drafted else 0)
            return accepted / tested
            """,
        "tokens_per_pass": """
            total = 0
            for row in stats:
                total += row[2]
            return total / len(stats)
            """,
        "improvement_factor": """
            if alpha == 1:
                return (k + 1) / (k * c + 1)
            return (1 - alpha ** (k + 1)) / ((1 - alpha) * (k * c + 1))
            """,
        "best_k": """
            values = [improvement_factor(alpha, k, c) for k in range(k_max + 1)]
            return values.index(max(values))
            """,
        # Feeds the draft one missing token at a time and cuts the caches entry by entry.
        "speculative_decode_cached": """
            text, stats = list(prompt), []
            while len(text) < len(prompt) + n:
                row = None
                for token in text[len(draft_model.cache):]:
                    row = draft_model.forward([token])[0]
                drafted, q = [], []
                for i in range(k):
                    q.append(list(with_temperature(row, temperature)))
                    drafted.append(int(rng.choice(len(q[-1]), p=q[-1])))
                    if i + 1 < k:
                        row = draft_model.forward([drafted[-1]])[0]
                rows = target.forward(text[len(target.cache):] + drafted)
                p = with_temperature(rows[len(rows) - k - 1:], temperature)
                emitted = verify(p, np.array(q), drafted, rng)
                text = text + emitted
                for cache in (target.cache, draft_model.cache):
                    while len(cache) > len(text) - 1:
                        cache.truncate(len(cache) - 1)
                stats.append([k, len(emitted) - 1, len(emitted)])
            return text[len(prompt):][:n], stats
            """,
        "speculation_pays": """
            return improvement_factor(alpha, 1, c) > 1
            """,
    },
    # numpy everywhere: arrays for stats and tokens, numpy scalars as results.
    "variant-numpy-arrays": {
        "with_temperature": """
            p = np.asarray(probs, dtype=np.float64)
            if temperature == 0:
                return (np.arange(p.shape[-1]) == np.argmax(p, axis=-1)[..., None]).astype(float)
            with np.errstate(divide="ignore"):
                z = np.log(p) / temperature
            z = z - z.max(axis=-1, keepdims=True)
            return np.exp(z) / np.exp(z).sum(axis=-1, keepdims=True)
            """,
        "speculative_decode": """
            out = np.zeros(0, dtype=np.int64)
            stats = []
            while out.size < n:
                context = list(prompt) + out.tolist()
                drafted, q = draft(draft_model, context, k, rng, temperature)
                p = with_temperature(target_model.probs_along(context, drafted), temperature)
                emitted = np.asarray(verify(p, np.asarray(q), list(drafted), rng))
                out = np.concatenate([out, emitted])
                stats.append(np.array([k, emitted.size - 1, emitted.size]))
            return out[:n], np.array(stats)
            """,
        "measured_alpha": """
            s = np.asarray(stats)
            tested = np.where(s[:, 1] < s[:, 0], s[:, 1] + 1, s[:, 0])
            return np.float64(s[:, 1].sum() / tested.sum())
            """,
        "tokens_per_pass": """
            return np.asarray(stats)[:, 2].mean()
            """,
        "improvement_factor": """
            return np.sum(np.float64(alpha) ** np.arange(k + 1)) / (k * c + 1)
            """,
        "best_k": """
            values = np.array([improvement_factor(alpha, k, c) for k in range(k_max + 1)])
            return np.int64(np.argmax(values))
            """,
        # Arrays for the text and the stats; the draft's cache always one entry shorter, as
        # Hugging Face crops its assistant.
        "speculative_decode_cached": """
            text = np.asarray(prompt, dtype=np.int64)
            stats = np.zeros((0, 3), dtype=np.int64)
            while text.size - len(prompt) < n:
                row = draft_model.forward(text[len(draft_model.cache):])[-1]
                drafted, q = np.zeros(0, dtype=np.int64), np.zeros((0, len(row)))
                for i in range(k):
                    q = np.vstack([q, with_temperature(row, temperature)])
                    drafted = np.append(drafted, rng.choice(len(row), p=q[-1]))
                    if i < k - 1:
                        row = draft_model.forward(drafted[-1:])[-1]
                fed = np.concatenate([text[len(target.cache):], drafted])
                p = with_temperature(target.forward(fed)[-(k + 1):], temperature)
                emitted = np.asarray(verify(p, q, drafted.tolist(), rng))
                text = np.concatenate([text, emitted])
                target.cache.truncate(text.size - 1)
                draft_model.cache.truncate(text.size - 2)
                stats = np.vstack([stats, [k, emitted.size - 1, emitted.size]])
            return text[len(prompt):len(prompt) + n], stats
            """,
        "speculation_pays": """
            return np.greater(alpha, c)
            """,
    },
    # --- common mistakes -------------------------------------------------------------
    "mistake-temperature-power-t": {
        "with_temperature": """
            p = np.asarray(probs, dtype=float)
            if temperature == 0:
                out = np.zeros_like(p)
                np.put_along_axis(out, np.argmax(p, axis=-1)[..., None], 1.0, axis=-1)
                return out
            w = p ** temperature
            return w / w.sum(axis=-1, keepdims=True)
            """,
    },
    # Samples at T but hands back the untempered rows.
    "mistake-q-at-temperature-one": {
        "draft": """
            running = list(context)
            tokens, rows = [], []
            for _ in range(k):
                q = draft_model.probs(running)
                token = int(rng.choice(len(q), p=with_temperature(q, temperature)))
                tokens.append(token)
                rows.append(q)
                running.append(token)
            return tokens, np.array(rows).reshape(k, draft_model.vocab_size)
            """,
    },
    # Appends the drafted tokens to the caller's list.
    "mistake-draft-changes-context": {
        "draft": """
            tokens, rows = [], []
            for _ in range(k):
                q = with_temperature(draft_model.probs(context), temperature)
                token = int(rng.choice(len(q), p=q))
                tokens.append(token)
                rows.append(q)
                context.append(token)
            return tokens, np.array(rows).reshape(k, draft_model.vocab_size)
            """,
    },
    # Crashes on an empty draft: np.stack of no rows.
    "mistake-draft-empty-crash": {
        "draft": """
            running, tokens, rows = list(context), [], []
            for _ in range(k):
                q = with_temperature(draft_model.probs(running), temperature)
                tokens.append(int(rng.choice(len(q), p=q)))
                rows.append(q)
                running.append(tokens[-1])
            return tokens, np.stack(rows)
            """,
    },
    "mistake-resample-from-p": {
        "speculative_decode": _own_loop(
            resample="emitted.append(int(rng.choice(p.shape[1], p=p[i])))"
        ),
    },
    "mistake-no-bonus-token": {
        "speculative_decode": _own_loop(bonus="pass"),
    },
    # The context keeps every drafted token, then the target's own token.
    "mistake-no-cache-rollback": {
        "speculative_decode": """
            out, stats = [], []
            context = list(prompt)
            while len(out) < n:
                drafted, q = draft(draft_model, context, k, rng, temperature)
                p = with_temperature(target_model.probs_along(context, drafted), temperature)
                emitted = verify(p, q, drafted, rng)
                out.extend(emitted)
                context = context + drafted + emitted[-1:]
                stats.append((k, len(emitted) - 1, len(emitted)))
            return out[:n], stats
            """,
    },
    # Tempers the draft but verifies against the untempered target.
    "mistake-target-not-tempered": {
        "speculative_decode": """
            out, stats = [], []
            while len(out) < n:
                context = list(prompt) + out
                drafted, q = draft(draft_model, context, k, rng, temperature)
                emitted = verify(target_model.probs_along(context, drafted), q, drafted, rng)
                out.extend(emitted)
                stats.append((k, len(emitted) - 1, len(emitted)))
            return out[:n], stats
            """,
    },
    # The target sees the emitted text, but the draft always continues the prompt alone.
    "mistake-stale-draft-context": {
        "speculative_decode": """
            out, stats = [], []
            while len(out) < n:
                context = list(prompt) + out
                drafted, q = draft(draft_model, list(prompt), k, rng, temperature)
                p = with_temperature(target_model.probs_along(context, drafted), temperature)
                emitted = verify(p, q, drafted, rng)
                out.extend(emitted)
                stats.append((k, len(emitted) - 1, len(emitted)))
            return out[:n], stats
            """,
    },
    # Never truncates either cache: the rejected drafted tokens stay in both.
    "mistake-cache-not-truncated": {"speculative_decode_cached": cached_loop([])},
    # Loops while n or fewer tokens are out: one target pass, and one stats row, too many.
    "mistake-cached-one-pass-too-many": {
        "speculative_decode_cached": cached_loop(ROLLBACK).replace(
            "while len(text) - len(prompt) < n:", "while len(text) - len(prompt) <= n:"
        )
    },
    "mistake-alpha-over-drafted": {
        "measured_alpha": """
            return sum(a for _, a, _ in stats) / sum(d for d, _, _ in stats)
            """,
    },
    "mistake-closed-form-at-one": {
        "improvement_factor": """
            return (1 - alpha ** (k + 1)) / ((1 - alpha) * (k * c + 1))
            """,
    },
    "mistake-best-k-from-one": {
        "best_k": """
            values = {k: improvement_factor(alpha, k, c) for k in range(1, k_max + 1)}
            return max(values, key=values.get) if values else 0
            """,
    },
    # alpha >= c: at alpha == c the factor is exactly 1, no gain.
    "mistake-pays-at-a-tie": {
        "speculation_pays": """
            return alpha >= c
            """,
    },
    "mistake-imports-reference": {
        "with_temperature": """
            from specdec_reference import with_temperature as reference

            return reference(probs, temperature)
            """,
    },
}


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/files: the engine
    from sample_builder import main

    sys.exit(main(Path(__file__).resolve().parent, SCENARIOS))
