"""capture_twice: two traces of the same program taken in ONE process, the way a long training
job is profiled twice: the same compiled executables, the same threads, warm.

    python scripts/capture/capture_twice.py --scenario barrier_in_loop_baseline \
        --out testdata/real/barrier_in_loop_baseline_twice_a \
        --out-b testdata/real/barrier_in_loop_baseline_twice_b [--steps 30] [--wait-idle 85]

The program is the scenario script's own (its `main()` runs with `--baseline --steps 2N`; this
script only replaces `models.capture` for that call), so it is the same program as the
scenario's committed capture. In the one process:

  1. the scenario builds its program and inputs (for steps -3..2N-1) and warms up exactly as
     it does alone (3 warm-up steps, -3..-1);
  2. trace A: jax.profiler trace of steps 0..N-1 -> <out>/vm.xplane.pb;
  3. trace B, right after A's stop_trace: steps N..2N-1 -> <out-b>/vm.xplane.pb. Step numbers
     CONTINUE (as in a training job profiled twice); each step still reads its own input
     batch, as the scenario's steps do;
  4. only then, for A and then B, the ground truth: the AOT-compiled HLO (hlo/), the decoded
     profile and the scenario's observed evidence, in each dir's ground_truth.json.

Every step is wrapped in StepTraceAnnotation('train', step_num=i) with block_until_ready
inside (models.trace_steps). ground_truth.json["same_process"] records the pairing, the pid and
the gap between the two traces; "same_process_as" names the other trace.
"""
import argparse
import importlib
import os
import shutil
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

# scenario -> (script module, its args, default steps per trace)
SCENARIOS = {
    "barrier_in_loop_baseline": ("capture_barrier_in_loop", ["--baseline"], 30),
    "donation_miss_baseline": ("capture_donation_miss", ["--baseline"], 8),
}


def cpu_idle_fraction(seconds):
    """Fraction of CPU time idle (idle + iowait) over `seconds`, from /proc/stat."""
    def snap():
        with open("/proc/stat") as fh:
            v = [int(x) for x in fh.readline().split()[1:]]
        return v[3] + v[4], sum(v)
    i0, t0 = snap()
    time.sleep(seconds)
    i1, t1 = snap()
    return (i1 - i0) / max(1, t1 - t0)


def wait_idle(min_idle_pct, window_s=2.0, windows=2, max_wait_s=1800):
    """Block until `windows` consecutive `window_s` windows each had the CPUs at least
    `min_idle_pct` % idle. Returns what was observed (the wait is recorded in ground truth)."""
    t0 = time.time()
    seen, ok = [], 0
    while True:
        f = cpu_idle_fraction(window_s)
        seen.append(round(100 * f, 1))
        ok = ok + 1 if 100 * f >= min_idle_pct else 0
        if ok >= windows:
            return {"min_idle_pct": min_idle_pct, "window_s": window_s, "windows": windows,
                    "waited_s": round(time.time() - t0, 1), "reached": True,
                    "last_windows_idle_pct": seen[-windows:], "loadavg": list(os.getloadavg())}
        if time.time() - t0 > max_wait_s:
            return {"min_idle_pct": min_idle_pct, "window_s": window_s, "windows": windows,
                    "waited_s": round(time.time() - t0, 1), "reached": False,
                    "last_windows_idle_pct": seen[-windows:], "loadavg": list(os.getloadavg())}
        if len(seen) % 15 == 0:
            print(f"[capture_twice] waiting for idle CPUs: last {seen[-5:]} % idle", flush=True)


def summary(steps):
    w = [s["wall_ms"] for s in steps]
    return {"count": len(w), "mean_ms": round(statistics.mean(w), 4),
            "stdev_ms": round(statistics.stdev(w), 4) if len(w) > 1 else 0.0,
            "median_ms": round(statistics.median(w), 4), "min_ms": min(w), "max_ms": max(w)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--scenario", required=True, choices=sorted(SCENARIOS))
    ap.add_argument("--out", required=True, help="directory of trace A (<scenario>_twice_a)")
    ap.add_argument("--out-b", required=True, help="directory of trace B (<scenario>_twice_b)")
    ap.add_argument("--steps", type=int, default=None, help="steps per trace (default per scenario)")
    ap.add_argument("--wait-idle", type=float, default=0.0, metavar="PCT",
                    help="before building the program, wait until the CPUs are at least PCT %% "
                         "idle for two 2-s windows (0: do not wait)")
    ap.add_argument("--max-wait", type=float, default=1800, metavar="S",
                    help="give up waiting for idle CPUs after S seconds and capture anyway "
                         "(recorded as reached: false)")
    a = ap.parse_args()
    module_name, script_args, default_steps = SCENARIOS[a.scenario]
    n = a.steps or default_steps
    out_a, out_b = os.path.abspath(a.out), os.path.abspath(a.out_b)
    name_a, name_b = os.path.basename(out_a), os.path.basename(out_b)
    for d in (out_a, out_b):
        shutil.rmtree(d, ignore_errors=True)

    idle = wait_idle(a.wait_idle, max_wait_s=a.max_wait) if a.wait_idle > 0 else None
    if idle is not None:
        print(f"[capture_twice] idle check: {idle}", flush=True)

    import models as M  # noqa: E402  (after the idle wait: importing jax costs CPU)
    scenario = importlib.import_module(module_name)

    def capture_twice(name, step_fn, *, out_dir, n_steps, warmup=3, program, hlo_fns,
                      extra_gt=None, profiler_options=None, keep_trace_json=False, decode=True,
                      **gt_kw):
        assert n_steps == 2 * n, (n_steps, n)
        # the scenario describes its --steps 2N run; each trace holds N of those steps
        assert f"{2 * n} traced steps" in program, program
        base_program = program.replace(f"{2 * n} traced steps", f"{n} traced steps")
        listener = M.CompileListener()
        M.warm_up(step_fn, warmup)
        wa = M.trace_steps(step_fn, out_a, range(0, n), listener,
                           profiler_options=profiler_options, keep_trace_json=keep_trace_json)
        wb = M.trace_steps(step_fn, out_b, range(n, 2 * n), listener,
                           profiler_options=profiler_options, keep_trace_json=keep_trace_json)
        gap_ms = round((wb["trace_window"]["trace_started_wall_ns"]
                        - wa["trace_window"]["stop_done_wall_ns"]) / 1e6, 3)
        pair = {"pid": os.getpid(), "twin_of": name, "step_numbering": "continuing",
                "trace_a": {"name": name_a, "step_nums": [0, n - 1], "steps_summary": summary(wa["steps"])},
                "trace_b": {"name": name_b, "step_nums": [n, 2 * n - 1], "steps_summary": summary(wb["steps"])},
                "gap_a_stop_done_to_b_trace_started_ms": gap_ms,
                "idle_wait_before_program": idle}
        pair["b_over_a_mean"] = round(pair["trace_b"]["steps_summary"]["mean_ms"]
                                      / pair["trace_a"]["steps_summary"]["mean_ms"], 4)
        out = []
        for which, window, d, me, other, lo in (("a", wa, out_a, name_a, name_b, 0),
                                                 ("b", wb, out_b, name_b, name_a, n)):
            prog = (f"{base_program} Same-process pair: one process ran the program of {name} "
                    f"(same script and args), one warm-up of {warmup} steps, then trace A = steps "
                    f"0..{n - 1} and right after it trace B = steps {n}..{2 * n - 1} (step numbers "
                    f"continue), each its own jax.profiler trace; this is trace {which.upper()}, "
                    f"steps {lo}..{lo + n - 1}.")
            extra = dict(extra_gt or {})
            extra["same_process_as"] = other
            extra["same_program_as"] = name
            extra["same_process"] = dict(pair, this_trace=which)
            gt, _, _ = M.write_ground_truth(me, window, out_dir=d, program=prog, hlo_fns=hlo_fns,
                                            extra_gt=extra, decode=decode, **gt_kw)
            out.append(gt)
        print(f"[capture_twice] {name}: A mean {pair['trace_a']['steps_summary']['mean_ms']} ms "
              f"(sd {pair['trace_a']['steps_summary']['stdev_ms']}), B mean "
              f"{pair['trace_b']['steps_summary']['mean_ms']} ms (sd "
              f"{pair['trace_b']['steps_summary']['stdev_ms']}), B/A {pair['b_over_a_mean']}, "
              f"gap {gap_ms} ms", flush=True)
        return out

    M.capture = capture_twice
    sys.argv = [module_name + ".py", "--out", out_a, "--steps", str(2 * n)] + script_args
    scenario.main()


if __name__ == "__main__":
    main()
