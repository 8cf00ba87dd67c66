"""Run XProf 2.24.2's own memory-profile converter on captured traces and store, per host and per
memory id, the summary it computes (the figures behind `xprof get_memory_profile`).

    /work/venv-xprof/bin/python scripts/capture/xprof_memory_profile_refs.py TRACE_DIR...

`xprof get_memory_profile` prints one allocator only (the one with the largest peak) and refuses
a session of several hosts; its converter (`memory_profile` tool data,
xprof/convert/xplane_to_memory_profile.cc) computes every allocator's summary. Each host file is
converted on its own, cold: copied into a fresh scratch directory with a fresh TMPDIR and
`use_saved_result` off, so no cache of an earlier run is read.

Writes TRACE_DIR/xprof/memory_profile__per_allocator.json =
{"tool", "xprof_version", "hosts": {<host>: {"memory_ids": [...], "num_hosts",
"per_allocator": {<memory id>: {"profile_summary": {...as XProf's JSON...},
"snapshots": n, "active_allocations": n}}}}}. A host without the host-threads plane or without
memory events has no memory id.
"""
from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile


def convert(pb: str) -> dict:
    from xprof.convert import raw_to_tool_data  # pylint: disable=import-outside-toplevel

    scratch = tempfile.mkdtemp(prefix="xprof_memprof_")
    try:
        os.environ["TMPDIR"] = scratch
        copy = os.path.join(scratch, os.path.basename(pb))
        shutil.copyfile(pb, copy)
        data, _ = raw_to_tool_data.xspace_to_tool_data([copy], "memory_profile", {"use_saved_result": False})
        if not data:
            return {"memory_ids": [], "num_hosts": 0, "per_allocator": {}, "empty_output": True}
        doc = json.loads(data)
        per = {}
        for mid, prof in (doc.get("memoryProfilePerAllocator") or {}).items():
            per[mid] = {
                "profile_summary": prof.get("profileSummary", {}),
                "snapshots": len(prof.get("memoryProfileSnapshots", [])),
                "active_allocations": len(prof.get("activeAllocations", [])),
            }
        return {"memory_ids": doc.get("memoryIds", []), "num_hosts": doc.get("numHosts", 0), "per_allocator": per}
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def main() -> None:
    import importlib.metadata  # pylint: disable=import-outside-toplevel

    version = importlib.metadata.version("xprof")
    for tdir in sys.argv[1:]:
        pbs = sorted(f for f in os.listdir(tdir) if f.endswith(".xplane.pb"))
        if not pbs:
            continue
        hosts = {f[: -len(".xplane.pb")]: convert(os.path.join(tdir, f)) for f in pbs}
        out = os.path.join(tdir, "xprof")
        os.makedirs(out, exist_ok=True)
        rec = {"tool": "memory_profile", "xprof_version": version, "hosts": hosts}
        with open(os.path.join(out, "memory_profile__per_allocator.json"), "w") as fh:
            json.dump(rec, fh, indent=1)
            fh.write("\n")
        ids = {h: sorted(v["per_allocator"]) for h, v in hosts.items()}
        print(f"{tdir}: {ids}", flush=True)


if __name__ == "__main__":
    main()
