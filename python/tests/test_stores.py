"""A logdir in an S3-compatible store (moto's server on loopback) scans like its local copy;
a missing object is a clear error."""

from __future__ import annotations

import os
import shutil
import socket
import tempfile

import pytest

import xlens

from test_xlens import ROOT


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture()
def s3(monkeypatch):
    from moto.server import ThreadedMotoServer
    import boto3

    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port)
    server.start()
    endpoint = f"http://127.0.0.1:{port}"
    for key, value in {
        "AWS_ENDPOINT": endpoint,
        "AWS_ALLOW_HTTP": "true",
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_REGION": "us-east-1",
        "AWS_DEFAULT_REGION": "us-east-1",
    }.items():
        monkeypatch.setenv(key, value)
    client = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1")
    client.create_bucket(Bucket="pod")
    yield client
    server.stop()


def test_an_s3_logdir_scans_like_its_local_copy(s3) -> None:
    local = tempfile.mkdtemp(prefix="xlens-s3-")
    run = os.path.join(local, "plugins", "profile", "2026_12_03_10_00_00")
    os.makedirs(run)
    src = os.path.join(ROOT, "testdata", "tpu", "tpu_straggler_host")
    for name in sorted(os.listdir(src)):
        if name.endswith(".xplane.pb"):
            shutil.copy(os.path.join(src, name), run)
            s3.upload_file(os.path.join(run, name), "pod", f"logs/plugins/profile/2026_12_03_10_00_00/{name}")
    try:
        expected = xlens.scan(local, frames=False).to_dict()
        assert xlens.scan("s3://pod/logs", frames=False).to_dict() == expected
        assert xlens.scan("s3://pod/logs/plugins/profile/2026_12_03_10_00_00", frames=False).to_dict() == expected
        one = xlens.scan("s3://pod/logs/plugins/profile/2026_12_03_10_00_00/host0.xplane.pb", frames=False)
        assert one.to_dict()["profile"]["hosts"] == ["host0"]
        with pytest.raises(xlens.XlensError, match="no such object"):
            xlens.scan("s3://pod/logs/nope.xplane.pb")
    finally:
        shutil.rmtree(local, ignore_errors=True)
