"""Turn what the in-kernel monitor reported, and what the sandbox's pipe carried, into flags."""

from __future__ import annotations

import json

from nbformat import NotebookNode

from autograder.cells import NOT_FINISHED, is_test_cell
from autograder.integrity.flags import PROBE_MIME, REASONS


def collect(
    nb: NotebookNode,
    setup: NotebookNode | None,
    report: NotebookNode | None,
    nonce: str | None,
    evidence: list[dict] | None,
) -> dict:
    """Turn the report cell's output and the sandbox's evidence into flags."""
    flags: set[str] = set()
    notes: list[str] = []
    data = None
    if setup is not None and any(o.get("output_type") == "error" for o in setup.outputs):
        err = next(o for o in setup.outputs if o.get("output_type") == "error")
        notes.append(f"monitor did not start: {err.get('ename')}: {err.get('evalue')}"[:300])
        flags.add("probe-missing")
    if report is not None:
        for out in report.get("outputs", []):
            if out.get("output_type") == "display_data" and PROBE_MIME in out.get("data", {}):
                data = out["data"][PROBE_MIME]
        if data is None:
            errors = [o for o in report.outputs if o.get("output_type") == "error"]
            ran = report.get("execution_count") is not None
            if ran and not errors:
                flags.add("tamper:probe-suppressed")
            else:
                flags.add("probe-missing")
                if errors:
                    notes.append(
                        f"report cell: {errors[0].get('ename')}: {errors[0].get('evalue')}"[:300]
                    )
        elif not isinstance(data, dict) or data.get("nonce") != nonce or not data.get("ok"):
            flags.add("tamper:probe-forged")
            data = None
    else:
        flags.add("probe-missing")

    records, keys = [], set()
    for record in list(evidence or []) + list((data or {}).get("records", [])):
        if not isinstance(record, dict):
            continue
        key = json.dumps(record, sort_keys=True, default=repr)
        if key not in keys:  # the pipe and the report carry the same records
            keys.add(key)
            records.append(record)
    for record in records:
        if record.get("kind") == "flag" and isinstance(record.get("flag"), str):
            flag = record["flag"]
            if flag in REASONS:
                flags.add(flag)

    # Every test cell the notebook shows as run must have been seen, compiled from its
    # true source and executed (from the pipe when sandboxed, else from the report).
    if evidence is not None or data is not None:
        seen = {r.get("test") for r in records if r.get("kind") == "test-start"}
        seen |= set((data or {}).get("seen", []))
        executed = {r.get("test") for r in records if r.get("kind") == "test-executed"}
        executed |= set((data or {}).get("executed", []))
        for cell in nb.cells:
            if not is_test_cell(cell) or cell.get("execution_count") is None:
                continue
            if any(o.get("ename") in NOT_FINISHED for o in cell.get("outputs", [])):
                continue
            grade_id = cell.metadata["nbgrader"].get("grade_id")
            if grade_id not in seen:
                flags.add("tamper:monitor-bypassed")
                notes.append(f"{grade_id}: not seen by the monitor")
            elif grade_id not in executed:
                flags.add("tamper:test-not-run")
                notes.append(f"{grade_id}: its code never executed")
    shown = [r for r in records if r.get("kind") in ("flag", "monitor-error")]
    return {
        "flags": sorted(flags),
        "notes": notes,
        "records": shown[:100],
        "sandboxed": evidence is not None,
    }
