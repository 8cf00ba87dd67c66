"""Scan a pod's session on a cluster: one task per host, the cross-host analysis on the driver.

Each task scans one host file where it runs (a path readable there, or an ``s3://``, ``gs://``,
``az://`` or ``https://`` URL it reads in ranged requests) and sends back a small record (findings, metrics, the
step table and what the cross-host detectors need); the driver combines the records into the
report a one-machine scan of the same hosts gives, cross-host detectors (stragglers, the
session verdict) included::

    >>> import ray, xlens.distributed
    >>> ray.init(address="auto")                      # an existing cluster; or ray.init() locally
    >>> r = xlens.distributed.scan_session("/mnt/profiles/logdir", engine="ray", out="/mnt/frames")
    >>> r.status, r.frames()["hosts"]

``engine="local"`` runs the tasks on threads of this process (the GIL is released while each
host is scanned), for a machine without Ray.
"""

from __future__ import annotations

import json
import os
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Mapping, Sequence

from . import Report, _xlens

__all__ = ["scan_session", "scan_host"]


def scan_host(
    host: str,
    path: str,
    config_json: str | None = None,
    steps: str | None = None,
    out: str | None = None,
) -> str:
    """One host's record (JSON), scanned where this runs; its tables go to ``out``."""
    return _xlens.scan_host_record(host, path, config_json, steps, out)


def _hosts(paths_or_logdir: str | os.PathLike[str] | Sequence[str | os.PathLike[str]]) -> tuple[str | None, list[tuple[str, str]]]:
    if isinstance(paths_or_logdir, (str, os.PathLike)):
        return _xlens.discover(os.fspath(paths_or_logdir))
    hosts = []
    for p in paths_or_logdir:
        _, found = _xlens.discover(os.fspath(p))
        hosts.extend(found)
    return None, sorted(hosts)


def scan_session(
    paths_or_logdir: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
    *,
    engine: str = "ray",
    workers: int | None = None,
    out: str | os.PathLike[str] | None = None,
    config: Mapping[str, Any] | None = None,
    steps: str | None = None,
) -> Report:
    """Scan every host of a session with one task per host and combine their records.

    ``paths_or_logdir`` is a logdir (its newest run), a run directory or a list of host files;
    ``engine`` is ``"ray"`` (tasks on the Ray cluster ``ray.init`` connected to, started locally
    with ``workers`` CPUs when none is) or ``"local"`` (``workers`` threads); ``out`` receives the
    Parquet dataset (per-host tables written by the tasks, unique part files, the report's tables
    by the driver). The report equals ``xlens scan`` on the same hosts.
    """
    run, hosts = _hosts(paths_or_logdir)
    if not hosts:
        raise _xlens.XlensError(f"no *.xplane.pb host files in {paths_or_logdir!r}")
    config_json = json.dumps(dict(config)) if config is not None else None
    out_dir = os.fspath(out) if out is not None else None
    if engine == "ray":
        import ray

        if not ray.is_initialized():
            ray.init(num_cpus=workers, include_dashboard=False, log_to_driver=False)
        task = ray.remote(num_cpus=1)(scan_host)
        records = ray.get([task.remote(h, p, config_json, steps, out_dir) for h, p in hosts])
    elif engine == "local":
        with ThreadPoolExecutor(max_workers=workers or os.cpu_count() or 1) as pool:
            records = list(pool.map(lambda hp: scan_host(hp[0], hp[1], config_json, steps, out_dir), hosts))
    else:
        raise ValueError(f"engine is 'ray' or 'local', not {engine!r}")
    native = _xlens.combine_records(run, records, config_json, steps, out_dir)
    return Report(native, out_dir, owns_frames_dir=False)
