"""Write testdata/real/manifest.json from the scenario directories' ground_truth.json files.

    python scripts/capture/build_manifest.py [--root testdata/real]
"""
import argparse
import hashlib
import json
import os

ORDER = ["barrier_in_loop", "barrier_in_loop_baseline", "barrier_in_loop_baseline_rerun",
         "barrier_in_loop_baseline_twice_a", "barrier_in_loop_baseline_twice_b", "profile_during_warmup",
         "remat", "remat_baseline", "input_starvation", "donation_miss", "donation_miss_baseline",
         "donation_miss_baseline_twice_a", "donation_miss_baseline_twice_b",
         "donation_miss_rerun", "padding_waste", "sharded_collectives", "sharded_donation",
         "convert_reduce", "debug_print"]


def sha(path):
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        h.update(fh.read())
    return h.hexdigest()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", default=os.path.join(os.path.dirname(__file__), "..", "..", "testdata", "real"))
    a = ap.parse_args()
    root = os.path.abspath(a.root)
    names = [d for d in os.listdir(root) if os.path.isfile(os.path.join(root, d, "ground_truth.json"))]
    names.sort(key=lambda n: (ORDER.index(n) if n in ORDER else len(ORDER), n))
    entries = []
    for n in names:
        d = os.path.join(root, n)
        with open(os.path.join(d, "ground_truth.json")) as fh:
            gt = json.load(fh)
        files = {}
        for base, _, fs in os.walk(d):
            for f in sorted(fs):
                p = os.path.join(base, f)
                files[os.path.relpath(p, d)] = os.path.getsize(p)
        pb = gt["profile_file"]
        xprof = {k: v for k, v in files.items() if k.startswith("xprof/")}
        ss = gt["steps_summary"]
        entries.append({
            "name": n,
            "dir": n,
            "profile": pb,
            "profile_bytes": files.get(pb),
            "profile_sha256": sha(os.path.join(d, pb)),
            "ground_truth_file": "ground_truth.json",
            "hlo_files": sorted(k for k in files if k.startswith("hlo/")),
            "xprof_refs_dir": "xprof" if xprof else None,
            "xprof_refs_count": sum(1 for k in xprof if not k.endswith("_index.json")),
            "program": gt["program"],
            "injected_fault": gt["injected_fault"],
            "expected_faults": gt["expected_faults"],
            "baseline": gt.get("baseline"),
            "evidence": gt["evidence"],
            "main_hlo_module": gt["main_hlo_module"],
            "steps": ss["count"],
            "step_wall_ms_perf_counter": [s["wall_ms"] for s in gt["steps"]],
            "mean_step_ms": ss["mean_ms"],
            "compilations_in_trace": gt["compilations_in_trace"]["backend_compile_count"],
            "num_devices": gt["environment"]["num_devices"],
            "xla_flags": gt["environment"]["xla_flags"],
            "extra_event_regexes": gt.get("extra_event_regexes", []),
            "sizes": {"profile_bytes": files.get(pb), "ground_truth_bytes": files.get("ground_truth.json"),
                      "hlo_bytes": sum(v for k, v in files.items() if k.startswith("hlo/")),
                      "xprof_bytes": sum(xprof.values()), "total_bytes": sum(files.values())},
            "files": files,
        })
        if n.endswith("_rerun"):  # same program and args as <x>, captured in another process
            entries[-1]["rerun_of"] = n[: -len("_rerun")]
        if gt.get("same_process_as"):  # <x>_twice_a / _b: two traces of <x>'s program in one process
            entries[-1]["same_process_as"] = gt["same_process_as"]
            entries[-1]["same_program_as"] = gt["same_program_as"]
    env = {}
    if entries:
        with open(os.path.join(root, entries[0]["dir"], "ground_truth.json")) as fh:
            e = json.load(fh)["environment"]
        env = {k: e.get(k) for k in ("jax", "jaxlib", "python", "cpu_count", "hostname")}
    man = {
        "description": ("Real XProf .xplane.pb profiles captured on CPU with jax.profiler.trace by "
                        "scripts/capture/ (one process per trace, except the same_process_as pairs), each with an injected performance "
                        "fault or none, ground truth measured in-process, the optimized HLO + XLA "
                        "cost_analysis of every jitted function, and XProf 2.24.2 CLI reference output."),
        "environment": dict(env, xprof="2.24.2"),
        "conventions": ("every traced step is wrapped in jax.profiler.StepTraceAnnotation('train', step_num=i) "
                        "with block_until_ready inside; warm-up before the trace unless the fault is warm-up; "
                        "profile flattened to <host>.xplane.pb (trace.json.gz dropped)"),
        "scenarios": entries,
    }
    with open(os.path.join(root, "manifest.json"), "w") as fh:
        json.dump(man, fh, indent=1)
    print(f"wrote {os.path.join(root, 'manifest.json')} ({len(entries)} scenarios)")


if __name__ == "__main__":
    main()
