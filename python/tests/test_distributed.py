"""A session scanned on a local Ray cluster (2 workers, 16 hosts) gives `fault_scan`'s report on
the same logdir; so does the thread engine; the frames land in one dataset."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile

import pytest

import xlens
import xlens.distributed

from test_xlens import ROOT, fault_scan


@pytest.fixture(scope="module")
def logdir():
    """16 hosts: the eight TPU reference fixtures, twice."""
    d = tempfile.mkdtemp(prefix="xlens-dist-")
    run = os.path.join(d, "plugins", "profile", "2026_12_03_12_00_00")
    os.makedirs(run)
    tpu = os.path.join(ROOT, "testdata", "tpu")
    fixtures = sorted(f for f in os.listdir(tpu) if os.path.isfile(os.path.join(tpu, f, "host0.xplane.pb")))
    assert len(fixtures) >= 8, fixtures
    for i in range(16):
        src = os.path.join(tpu, fixtures[i % 8], "host0.xplane.pb")
        shutil.copy(src, os.path.join(run, f"host{i:02d}.xplane.pb"))
    yield d
    shutil.rmtree(d, ignore_errors=True)


def cli(path: str) -> dict:
    out = subprocess.run([fault_scan(), path, "--format", "json", "--quiet"], check=True, capture_output=True, text=True)
    return json.loads(out.stdout)


def test_ray_equals_the_one_machine_scan(logdir: str) -> None:
    import ray

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        with tempfile.TemporaryDirectory() as out:
            r = xlens.distributed.scan_session(logdir, engine="ray", workers=2, out=out)
            assert r.to_dict() == cli(logdir)
            assert len(r.to_dict()["profile"]["hosts"]) == 16
            frames = r.frames()
            assert frames["hosts"].height == 16
            assert frames["steps"]["host_name"].n_unique() == 16
    finally:
        ray.shutdown()


def test_threads_equal_the_one_machine_scan(logdir: str) -> None:
    r = xlens.distributed.scan_session(logdir, engine="local", workers=2)
    assert r.to_dict() == cli(logdir)


def test_an_unreadable_host_is_skipped_not_lost(logdir: str) -> None:
    run = os.path.join(logdir, "plugins", "profile", "2026_12_03_12_00_00")
    hosts = sorted(os.path.join(run, f) for f in os.listdir(run))
    with tempfile.TemporaryDirectory() as d:
        bad = os.path.join(d, "broken.xplane.pb")
        with open(bad, "wb") as f:
            f.write(b"\xff\xff\xff")
        r = xlens.distributed.scan_session(hosts[:2] + [bad], engine="local")
        assert r.status == "INCOMPLETE"
        assert [s["host"] for s in r.to_dict()["skipped_hosts"]] == ["broken"]
