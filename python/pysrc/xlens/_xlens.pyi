"""Type stubs of the native module (the ``xlens`` package wraps it)."""

__version__: str

class XlensError(Exception): ...

class NativeReport:
    def json(self) -> str: ...
    def text(self) -> str: ...
    def html(self) -> str: ...

def scan(
    path: str,
    hosts: list[str] | None = None,
    config_json: str | None = None,
    steps: str | None = None,
    frames_dir: str | None = None,
) -> NativeReport: ...
def capture(
    targets: list[str],
    duration_ms: int,
    logdir: str,
    session: str | None = None,
    scan: bool = True,
    host_tracer_level: int = 2,
    device_tracer_level: int = 1,
    python_tracer_level: int = 0,
    attempts: int = 3,
    timeout_ms: int = 60000,
) -> tuple[str, NativeReport | None]: ...
def load_report(text: str) -> NativeReport: ...
def diff(
    base: NativeReport,
    new: NativeReport,
    base_repeats: list[NativeReport] = ...,
    new_repeats: list[NativeReport] = ...,
    min_change_pct: float = 2.0,
) -> str: ...
def diff_html(diff_json: str) -> str: ...
def op_profile(path: str) -> str: ...
def kernel_stats(path: str, top: int | None = None) -> str: ...
def hlo_modules(path: str) -> tuple[str, list[str]]: ...
def inventory(path: str) -> str: ...
def plan(args: list[str]) -> str: ...
def discover(path: str) -> tuple[str | None, list[tuple[str, str]]]: ...
def scan_host_record(
    host: str,
    path: str,
    config_json: str | None = None,
    steps: str | None = None,
    frames_dir: str | None = None,
) -> str: ...
def combine_records(
    run: str | None,
    records: list[str],
    config_json: str | None = None,
    steps: str | None = None,
    frames_dir: str | None = None,
) -> NativeReport: ...
