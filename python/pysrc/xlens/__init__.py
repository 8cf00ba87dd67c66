"""xlens: offline analysis of XProf profiles (``*.xplane.pb``).

Scan a capture and read what is wrong with the step, with evidence and a fix::

    >>> import xlens
    >>> r = xlens.scan("testdata/corpus/host_callback")      # a file, a run dir or a logdir
    >>> r.status
    'NEEDS_ATTENTION'
    >>> [f["id"] for f in r.findings]
    ['host_callback_stall']
    >>> r.frames()["steps"]                                  # polars DataFrames (``pip install xlens[frames]``)

The same Rust code as the ``xlens`` command line runs underneath, with the GIL released; the
documents are those of its ``--json`` output, the frames those of its ``--out`` Parquet dataset.
"""

from __future__ import annotations

import glob
import json
import os
import shutil
import tempfile
import weakref
from typing import Any, Iterable, Mapping, Sequence

from . import _xlens
from ._xlens import XlensError

__version__: str = _xlens.__version__
__all__ = [
    "Report",
    "Diff",
    "XlensError",
    "scan",
    "capture",
    "load_report",
    "diff",
    "op_profile",
    "kernel_stats",
    "hlo_modules",
    "inventory",
    "plan",
]


def _path(path: str | os.PathLike[str]) -> str:
    return os.fspath(path)


class Report:
    """The report of one scan: ``status``, ``summary``, ``findings`` and the rest of the JSON
    document (``to_dict()``), the HTML page (``to_html(path)``) and every table as a polars
    DataFrame (``frames()``)."""

    def __init__(self, native: Any, frames_dir: str | None = None, *, owns_frames_dir: bool = True) -> None:
        self._native = native
        self._doc: dict[str, Any] = json.loads(native.json())
        self._frames_dir = frames_dir
        self._frames: dict[str, Any] | None = None
        #: For a report of ``xlens.capture``: the capture's document (``run_dir``, ``session``,
        #: ``duration_ms``, ``targets``), as ``xlens capture --json`` prints it; else ``None``.
        self.capture: dict[str, Any] | None = None
        if frames_dir is not None and owns_frames_dir:
            self._cleanup = weakref.finalize(self, shutil.rmtree, frames_dir, True)

    @property
    def status(self) -> str:
        """``OPTIMAL``, ``NEEDS_ATTENTION`` or ``INCOMPLETE``."""
        return self._doc["status"]

    @property
    def summary(self) -> str:
        """One paragraph: the verdict, the profile, what could not be checked."""
        return self._doc["summary"]

    @property
    def findings(self) -> list[dict[str, Any]]:
        """The findings, P0 first, each as in the JSON report (``id``, ``severity``, ``what``,
        ``evidence``, ``impact``, ``fix``, ...)."""
        return self._doc["findings"]

    @property
    def metrics(self) -> dict[str, Any]:
        """The health snapshot (step times, utilisation, idle, memory peak, ...)."""
        return self._doc["metrics"]

    def to_dict(self) -> dict[str, Any]:
        """The report as a dict: exactly the document of ``xlens scan --format json``."""
        return json.loads(self._native.json())

    def to_json(self) -> str:
        """The report as the JSON text of ``xlens scan --format json``."""
        return self._native.json()

    def to_text(self) -> str:
        """The text report ``xlens scan`` prints."""
        return self._native.text()

    def to_html(self, path: str | os.PathLike[str] | None = None) -> str:
        """The self-contained HTML page; written to ``path`` when given. Returns the page."""
        page = self._native.html()
        if path is not None:
            with open(_path(path), "w", encoding="utf-8") as f:
                f.write(page)
        return page

    def frames(self) -> dict[str, Any]:
        """Every table as a polars DataFrame, keyed by table name: the tables and schemas of the
        Parquet dataset ``xlens scan --out DIR`` writes (``steps``, ``op_profile``, ``findings``,
        ``evidence``, ``metrics``, ...), read from that dataset's files (Arrow all the way, no
        Python objects per row). Needs ``polars``."""
        if self._frames is None:
            if self._frames_dir is None:
                raise XlensError("this report has no frames: scan with frames=True (the default)")
            import polars as pl

            tables: dict[str, Any] = {}
            for table in sorted(os.listdir(self._frames_dir)):
                files = sorted(glob.glob(os.path.join(self._frames_dir, table, "**", "*.parquet"), recursive=True))
                if files:
                    tables[table] = pl.concat([pl.read_parquet(f) for f in files], how="vertical_relaxed")
            self._frames = tables
        return self._frames

    def __repr__(self) -> str:
        return f"<xlens.Report {self.status}: {len(self.findings)} finding(s)>"


class Diff:
    """Two runs compared: ``verdict`` (``IMPROVED``, ``REGRESSED``, ``NEUTRAL``,
    ``INCOMPARABLE``), ``summary`` and the document of ``xlens diff --json`` (``to_dict()``)."""

    def __init__(self, doc_json: str) -> None:
        self._json = doc_json
        self._doc: dict[str, Any] = json.loads(doc_json)

    @property
    def verdict(self) -> str:
        """``IMPROVED``, ``REGRESSED``, ``NEUTRAL`` or ``INCOMPARABLE``."""
        return self._doc["verdict"]

    @property
    def summary(self) -> str:
        """One paragraph: the verdict, the step time change and its 95 % interval, the findings."""
        return self._doc["summary"]

    def to_dict(self) -> dict[str, Any]:
        """The document of ``xlens diff --json``."""
        return json.loads(self._json)

    def to_html(self, path: str | os.PathLike[str] | None = None) -> str:
        """The diff's self-contained HTML page; written to ``path`` when given."""
        page = _xlens.diff_html(self._json)
        if path is not None:
            with open(_path(path), "w", encoding="utf-8") as f:
                f.write(page)
        return page

    def __repr__(self) -> str:
        return f"<xlens.Diff {self.verdict}>"


def scan(
    path: str | os.PathLike[str],
    *,
    config: Mapping[str, Any] | None = None,
    hosts: Sequence[str] | None = None,
    steps: str | None = None,
    frames: bool = True,
) -> Report:
    """Scan a profile: a ``*.xplane.pb``, a run directory or a logdir (its newest run).

    ``config`` takes what ``xlens.toml`` holds, as a dict (``tomllib.load`` of the file works):
    ``{"detectors": {"only": [ids], "disable": [ids]}, "thresholds": {"exposed_collective":
    {"min_pct_of_step": 3.0}}}`` (``"only"`` and ``"disable"`` may also stand at the top; the
    ``[output]`` section belongs to the command line and is refused); ``hosts`` scans only those
    hosts; ``steps`` only those steps (``"5.."``, ``"3..8"``); ``frames=False`` skips the tables.

    >>> xlens.scan("testdata/corpus/clean").status
    'OPTIMAL'
    """
    frames_dir = tempfile.mkdtemp(prefix="xlens-frames-") if frames else None
    try:
        native = _xlens.scan(
            _path(path),
            list(hosts) if hosts is not None else None,
            json.dumps(dict(config)) if config is not None else None,
            steps,
            frames_dir,
        )
    except BaseException:
        if frames_dir is not None:
            shutil.rmtree(frames_dir, ignore_errors=True)
        raise
    return Report(native, frames_dir)


def capture(
    targets: str | Sequence[str],
    *,
    duration_ms: int = 2000,
    logdir: str | os.PathLike[str] = ".",
    session: str | None = None,
    scan: bool = True,
    host_tracer_level: int = 2,
    device_tracer_level: int = 1,
    python_tracer_level: int = 0,
    attempts: int = 3,
    timeout_ms: int = 60_000,
) -> Report | dict[str, Any]:
    """Capture running programs now, as ``xlens capture`` does: every target (``"host:port"``
    of a program that called ``jax.profiler.start_server(port)``; a list, or one string with
    commas) in parallel, in one session, into ``<logdir>/plugins/profile/<session>/``.
    ``logdir`` may be an object-store URL (``"s3://bucket/prefix"``, ``gs://``, ``az://``;
    credentials from the environment): the targets are asked to write there, xlens puts the
    files of the others into the store, and the run is scanned from the store (``run_dir`` is
    then the URL).

    With ``scan=True`` (the default) returns the run's :class:`Report` (``INCOMPLETE``, naming
    them, when some targets were not captured), its ``capture`` attribute holding the capture's
    document (``run_dir``, ``session``, ``duration_ms``, ``targets`` with each one's status and
    error); with ``scan=False`` returns that document alone. Raises :class:`XlensError` when no
    target was captured or an option is out of range. The report has no frames: scan
    ``report.capture["run_dir"]`` with ``xlens.scan`` for them.
    """
    if isinstance(targets, str):
        targets = targets.split(",")
    doc_json, native = _xlens.capture(
        list(targets),
        duration_ms,
        _path(logdir),
        session,
        scan,
        host_tracer_level,
        device_tracer_level,
        python_tracer_level,
        attempts,
        timeout_ms,
    )
    doc: dict[str, Any] = json.loads(doc_json)
    doc.pop("report", None)
    if native is None:
        return doc
    report = Report(native)
    report.capture = doc
    return report


def load_report(path: str | os.PathLike[str]) -> Report:
    """A report saved with ``xlens scan --format json`` (e.g. a CI baseline); it has no frames."""
    with open(_path(path), encoding="utf-8") as f:
        return Report(_xlens.load_report(f.read()))


def _report(run: Report | str | os.PathLike[str]) -> Report:
    if isinstance(run, Report):
        return run
    p = _path(run)
    if os.path.isfile(p) and p.lower().endswith(".json"):
        return load_report(p)
    return scan(p, frames=False)


def diff(
    base: Report | str | os.PathLike[str],
    new: Report | str | os.PathLike[str],
    *,
    base_repeats: Iterable[Report | str | os.PathLike[str]] = (),
    new_repeats: Iterable[Report | str | os.PathLike[str]] = (),
    min_change_pct: float = 2.0,
) -> Diff:
    """Compare two runs (reports, profiles, or saved JSON reports): did the change help?

    Repeated runs of a side (``base_repeats``, ``new_repeats``) put run-to-run noise into the
    interval the verdict rests on.
    """
    b, n = _report(base), _report(new)
    more_b = [_report(r)._native for r in base_repeats]
    more_n = [_report(r)._native for r in new_repeats]
    return Diff(_xlens.diff(b._native, n._native, more_b, more_n, min_change_pct))


def op_profile(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Steps, the op profile and the step anatomy of every host (``xlens ops --json``)."""
    return json.loads(_xlens.op_profile(_path(path)))


def kernel_stats(path: str | os.PathLike[str], *, top: int | None = None) -> dict[str, Any]:
    """GPU kernels of every host (``xlens kernels --json``)."""
    return json.loads(_xlens.kernel_stats(_path(path), top))


def hlo_modules(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The HLO modules of a profile or of one ``*.hlo_proto.pb`` (``xlens hlo --json``)."""
    doc, _warnings = _xlens.hlo_modules(_path(path))
    return json.loads(doc)


def inventory(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Planes, lines and event counts of every host (``xlens inventory --json``)."""
    return json.loads(_xlens.inventory(_path(path)))


def plan(**flags: Any) -> Any:
    """An HBM plan (``xlens plan ... --json``); keyword arguments are its flags, ``_`` for ``-``:
    ``xlens.plan(params=7e9, recipe="mixed-bf16", optimizer="adam", chip="v5e")``."""
    words: list[str] = []
    for key, value in flags.items():
        words.append("--" + key.replace("_", "-"))
        if value is not True:
            words.append(str(value))
    return json.loads(_xlens.plan(words))
