"""The benchmark report's assembly (benchmarks/run.py), without measuring anything: --merge's one
report from runs of some families each."""

import json
import os

import pytest

from benchmarks.run import main


def _write_run(directory, name, families, records, ceilings):
    """A results JSON and its .md as `python -m benchmarks --ops ...` writes them: a header, then
    one `## family` block per family (a table row and a `###` note)."""
    os.makedirs(directory, exist_ok=True)
    payload = {
        "device": {"name": name, "date": "2026-11-28"},
        "ceilings": ceilings,
        "quick": False,
        "families": families,
        "records": records,
    }
    prefix = os.path.join(directory, "gpu")
    with open(prefix + ".json", "w") as f:
        json.dump(payload, f)
    blocks = "".join(f"## {fam}\n\n| {fam} row |\n\n### {fam} note\n\ntext of {fam}\n\n" for fam in families)
    with open(prefix + ".md", "w") as f:
        f.write(
            f"# cudasteps benchmarks: {name}\n\nheader of {directory}\n\n"
            + blocks
            + "## Plots\n\n![x](x.png)\n"
        )
    return prefix + ".json"


def _record(op, ms):
    return {"op": op, "case": "c", "impl": "torch", "dtype": "float32", "shape": [1], "ms": ms}


def test_merge_runs_of_some_families(tmp_path):
    """Families in the usual order whichever run measured them, each with its own block (notes
    included); the first run's header and ceilings, a line naming each run's families; every
    record of both runs; a family measured twice, or runs from two GPUs, refused by name."""
    a = _write_run(
        str(tmp_path / "a"),
        "GPU X",
        ["copy", "gemm", "fp8"],
        [_record("copy", 1.0), _record("mm", 2.0)],
        {"copy_gbps": 100.0, "mm_tflops": 10.0},
    )
    b = _write_run(
        str(tmp_path / "b"),
        "GPU X",
        ["e2e", "transpose"],
        [_record("ffn_step", 3.0)],
        {"copy_gbps": 101.0, "mm_tflops": 11.0},
    )
    out = tmp_path / "out"
    assert main(["--merge", a, b, "--results-dir", str(out)]) == 0
    merged = json.loads((out / "gpu-x.json").read_text())
    assert merged["families"] == ["copy", "transpose", "gemm", "e2e", "fp8"]
    assert [r["op"] for r in merged["records"]] == ["copy", "mm", "ffn_step"]
    assert merged["ceilings"] == {"copy_gbps": 100.0, "mm_tflops": 10.0}
    md = (out / "gpu-x.md").read_text()
    headings = [line[3:] for line in md.split("\n") if line.startswith("## ")]
    assert headings[:5] == ["copy", "transpose", "gemm", "e2e", "fp8"]
    assert "header of " + str(tmp_path / "a") in md and "header of " + str(tmp_path / "b") not in md
    assert "run 1: copy, gemm, fp8; run 2: transpose, e2e." in md
    for fam in ("copy", "transpose", "gemm", "e2e", "fp8"):
        assert f"### {fam} note\n\ntext of {fam}" in md
    assert md.count("## Plots") <= 1

    twice = _write_run(str(tmp_path / "c"), "GPU X", ["gemm"], [], {})
    with pytest.raises(SystemExit, match="gemm is in .*a/gpu.json and in .*c/gpu.json"):
        main(["--merge", a, twice, "--results-dir", str(out)])
    other = _write_run(str(tmp_path / "d"), "GPU Y", ["reduce"], [], {})
    with pytest.raises(SystemExit, match="different GPUs"):
        main(["--merge", a, other, "--results-dir", str(out)])
