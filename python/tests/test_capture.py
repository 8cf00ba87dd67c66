"""``xlens.capture`` against a live JAX program (``scripts/capture/train_server.py`` serving
``jax.profiler.start_server``), run with the interpreter ``XLENS_JAX_PYTHON`` names (else
``python3`` when it imports jax); skipped without one, as the Rust capture tests are, unless
``XLENS_REQUIRE_JAX`` is set."""

from __future__ import annotations

import os
import socket
import subprocess
import sys

import pytest

import xlens
from test_stores import s3  # noqa: F401  (the S3 server fixture)

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
TRAIN_SERVER = os.path.join(ROOT, "scripts", "capture", "train_server.py")


def jax_python() -> str | None:
    python = os.environ.get("XLENS_JAX_PYTHON") or "python3"
    ok = subprocess.run([python, "-c", "import jax"], capture_output=True).returncode == 0
    if not ok and os.environ.get("XLENS_REQUIRE_JAX"):
        pytest.fail(f"XLENS_REQUIRE_JAX is set but {python} cannot import jax")
    return python if ok else None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def train_server():
    python = jax_python()
    if python is None:
        pytest.skip("no python with jax (set XLENS_JAX_PYTHON)")
    port = free_port()
    env = dict(os.environ, XLA_FLAGS="--xla_cpu_multi_thread_eigen=false", PYTHONUNBUFFERED="1")
    proc = subprocess.Popen(
        [python, TRAIN_SERVER, str(port)], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env
    )
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            if line.strip() == "ready":
                break
        else:
            pytest.fail(f"{TRAIN_SERVER} ended before it was ready")
        yield f"localhost:{port}"
    finally:
        proc.kill()
        proc.wait()


def test_capture_returns_the_scanned_report(train_server, tmp_path):
    r = xlens.capture(train_server, duration_ms=1000, logdir=tmp_path, session="py")
    assert isinstance(r, xlens.Report)
    assert r.metrics["step_count"] > 10
    assert "train_step" in (r.to_dict()["profile"]["main_program"] or "")
    run_dir = r.capture["run_dir"]
    assert run_dir == os.path.join(str(tmp_path), "plugins", "profile", "py")
    [t] = r.capture["targets"]
    assert (t["status"], t["error"]) == ("ok", None)
    # The same report as scanning the run afterwards.
    assert r.to_dict() == xlens.scan(run_dir, frames=False).to_dict()


def test_capture_of_nothing_is_an_error(tmp_path):
    with pytest.raises(xlens.XlensError, match="no target was captured"):
        xlens.capture([f"localhost:{free_port()}"], duration_ms=100, logdir=tmp_path, attempts=1)
    with pytest.raises(xlens.XlensError, match="not a target"):
        xlens.capture("nonsense", duration_ms=100, logdir=tmp_path)


def test_capture_into_an_s3_logdir(train_server, s3):
    """``logdir=`` an object-store URL (moto's server on loopback, the fixture of
    ``test_stores.py``): jax's CPU runtime cannot write to ``s3://``, so xlens puts the host file
    into the store, and the report is that of the run read back from there."""
    # A prefix of its own: moto's in-process servers share one backend, so test_stores.py's
    # "pod/logs" must not see this run.
    r = xlens.capture(train_server, duration_ms=1000, logdir="s3://pod/capture-logs", session="py-s3")
    run_dir = "s3://pod/capture-logs/plugins/profile/py-s3"
    host = train_server.replace(":", "_")
    assert r.capture["run_dir"] == run_dir
    assert r.capture["targets"][0]["status"] == "ok"
    assert r.capture["targets"][0]["file"] == f"{run_dir}/{host}.xplane.pb"
    keys = [o["Key"] for o in s3.list_objects_v2(Bucket="pod", Prefix="capture-logs/")["Contents"]]
    assert keys == [f"capture-logs/plugins/profile/py-s3/{host}.xplane.pb"]
    assert r.to_dict() == xlens.scan(run_dir, frames=False).to_dict()
