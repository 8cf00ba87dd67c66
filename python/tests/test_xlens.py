"""The Python package against the command line: the same documents, the same tables.

Needs the repository's `fault_scan` example built (`cargo test --workspace` builds it) or
`XLENS_FAULT_SCAN` naming it; the tests fail, not skip, without it.
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile

import polars as pl
import pytest

import xlens

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def fault_scan() -> str:
    exe = os.environ.get("XLENS_FAULT_SCAN") or os.path.join(
        os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target")), "debug", "examples", "fault_scan"
    )
    if not os.path.exists(exe):
        pytest.fail(f"{exe} is not built: run `cargo test --workspace` (or set XLENS_FAULT_SCAN)")
    return exe


def profiles() -> list[str]:
    with open(os.path.join(ROOT, "testdata", "labels.json"), encoding="utf-8") as f:
        return [p["profile"] for p in json.load(f)["profiles"]]


def cli_json(rel: str) -> dict:
    out = subprocess.run(
        [fault_scan(), os.path.join(ROOT, "testdata", rel), "--format", "json", "--quiet"],
        check=True,
        capture_output=True,
        text=True,
    )
    return json.loads(out.stdout)


@pytest.mark.parametrize("rel", profiles())
def test_to_dict_is_the_cli_json(rel: str) -> None:
    report = xlens.scan(os.path.join(ROOT, "testdata", rel), frames=False)
    assert report.to_dict() == cli_json(rel)
    assert report.status in ("OPTIMAL", "NEEDS_ATTENTION", "INCOMPLETE")


def test_the_bundled_sample_and_its_frames() -> None:
    r = xlens.scan(os.path.join(ROOT, "testdata", "corpus", "host_callback"))
    assert r.status == "NEEDS_ATTENTION"
    assert [f["id"] for f in r.findings] == ["host_callback_stall"]
    frames = r.frames()
    for table in ("findings", "evidence", "steps", "op_profile", "categories", "metrics", "hosts"):
        assert isinstance(frames[table], pl.DataFrame), table
    assert frames["findings"]["id"].to_list() == ["host_callback_stall"]
    assert frames["steps"].height == r.metrics["step_count"]
    # What the README plots.
    assert frames["steps"].select("number", "step_time_ms").height == r.metrics["step_count"]
    assert "step_time_ms_mean" in frames["metrics"]["metric"].to_list()


def test_frames_equal_the_parquet_dataset() -> None:
    rel = os.path.join("tpu", "tpu_straggler_host")
    r = xlens.scan(os.path.join(ROOT, "testdata", rel))
    with tempfile.TemporaryDirectory() as out:
        subprocess.run(
            [fault_scan(), os.path.join(ROOT, "testdata", rel), "--quiet", "--out", out],
            check=True,
            capture_output=True,
        )
        for table, df in r.frames().items():
            files = []
            for dirpath, _, names in os.walk(os.path.join(out, table)):
                files += [os.path.join(dirpath, n) for n in names if n.endswith(".parquet")]
            theirs = pl.concat([pl.read_parquet(f) for f in sorted(files)], how="vertical_relaxed")
            # The `scan` column names the writer, different for every scan.
            key = [c for c in df.columns if c != "scan"]
            assert df.drop("scan").sort(key).equals(theirs.drop("scan").sort(key)), table


def test_config_hosts_and_steps() -> None:
    path = os.path.join(ROOT, "testdata", "tpu", "tpu_straggler_host")
    r = xlens.scan(path, hosts=["host0"], steps="3..5", frames=False)
    assert r.to_dict()["profile"]["hosts"] == ["host0"]
    assert r.metrics["step_count"] == 3
    only = xlens.scan(path, config={"only": ["straggler_core"]}, frames=False)
    assert all(f["id"] == "straggler_core" for f in only.findings)
    with pytest.raises(xlens.XlensError, match="not a detector id"):
        xlens.scan(path, config={"only": ["nope"]})
    # The dict of xlens.toml, as tomllib reads the file, means the same.
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+

    toml = tomllib.loads('[detectors]\nonly = ["straggler_core"]\n')
    same = xlens.scan(path, config=toml, frames=False)
    assert [f["id"] for f in same.findings] == [f["id"] for f in only.findings]
    with pytest.raises(xlens.XlensError, match="output"):
        xlens.scan(path, config=tomllib.loads('[output]\nformat = "json"\n'))


def test_errors_name_the_file() -> None:
    with tempfile.TemporaryDirectory() as d:
        bad = os.path.join(d, "h.xplane.pb")
        with open(bad, "wb") as f:
            f.write(b"\xff\xff\xff")
        with pytest.raises(xlens.XlensError, match="h.xplane.pb"):
            xlens.scan(bad)
    with pytest.raises(xlens.XlensError):
        xlens.scan("/nonexistent/profile")


def test_diff_of_a_fix() -> None:
    real = os.path.join(ROOT, "testdata", "real")
    d = xlens.diff(os.path.join(real, "barrier_in_loop"), os.path.join(real, "barrier_in_loop_baseline"))
    assert d.verdict == "IMPROVED"
    assert [f["id"] for f in d.to_dict()["findings"]["resolved"]] == ["barrier_in_loop"]
    assert "<svg" in d.to_html()
    with tempfile.TemporaryDirectory() as t:
        saved = os.path.join(t, "base.json")
        with open(saved, "w", encoding="utf-8") as f:
            f.write(xlens.scan(os.path.join(real, "barrier_in_loop"), frames=False).to_json())
        again = xlens.diff(saved, os.path.join(real, "barrier_in_loop_baseline"))
        assert again.to_dict() == d.to_dict()


def test_the_other_documents() -> None:
    tpu = os.path.join(ROOT, "testdata", "tpu", "tpu_basic")
    with open(os.path.join(ROOT, "tests", "golden", "op_profile_tpu_basic.json"), encoding="utf-8") as f:
        assert xlens.op_profile(tpu)["hosts"][0] == json.load(f)
    assert xlens.inventory(tpu)["hosts"][0]["host"] == "host0"
    assert "modules" in xlens.hlo_modules(os.path.join(ROOT, "testdata", "real", "sharded_donation"))
    with open(os.path.join(ROOT, "tests", "golden", "kernel_stats_amd_te_fused_attn.json"), encoding="utf-8") as f:
        assert xlens.kernel_stats(os.path.join(ROOT, "testdata", "field", "amd_te_fused_attn"), top=5) == json.load(f)
    plan = xlens.plan(params=7e9, recipe="mixed-bf16", optimizer="adam", chip="v5e", json=True)
    assert plan["bytes_per_param"] > 0
