#!/usr/bin/env python3
"""A live JAX training program for the capture tests: it answers XProf's ProfilerService.

Usage: train_server.py PORT [TRIGGER_FILE]

Runs a small jitted training step (a two-layer MLP, SGD) in a loop, each step under
`jax.profiler.StepTraceAnnotation("train", step_num=N)`, after
`jax.profiler.start_server(PORT)`. Prints "ready" on stdout (flushed) once the server listens
and the step has been compiled, then runs until it is killed.

TRIGGER_FILE (optional): while that file exists, each step also sleeps SLOW_STEP_S seconds
inside its step annotation, so that a capture sees the step time regress (the monitor tests
create the file to make the program slow down).
"""

import os
import sys
import time

import jax
import jax.numpy as jnp

# Extra time each step spends while the trigger file exists.
SLOW_STEP_S = 0.05
# A short pause between steps, so that the program does not take a whole core from the test
# machine (and a capture window holds a few dozen steps).
PAUSE_S = 0.005


def init(key):
    k1, k2 = jax.random.split(key)
    return {
        "w1": jax.random.normal(k1, (128, 256)) * 0.05,
        "w2": jax.random.normal(k2, (256, 10)) * 0.05,
    }


def loss_fn(params, x, y):
    h = jnp.tanh(x @ params["w1"])
    logits = h @ params["w2"]
    return jnp.mean((logits - y) ** 2)


@jax.jit
def train_step(params, x, y):
    loss, grads = jax.value_and_grad(loss_fn)(params, x, y)
    params = jax.tree_util.tree_map(lambda p, g: p - 0.01 * g, params, grads)
    return params, loss


def main():
    if len(sys.argv) not in (2, 3):
        sys.exit("usage: train_server.py PORT [TRIGGER_FILE]")
    port = int(sys.argv[1])
    trigger = sys.argv[2] if len(sys.argv) == 3 else None
    key = jax.random.PRNGKey(0)
    params = init(key)
    x = jax.random.normal(key, (64, 128))
    y = jax.random.normal(key, (64, 10))
    # Compile before serving: a capture sees steady-state steps only.
    params, loss = train_step(params, x, y)
    loss.block_until_ready()
    jax.profiler.start_server(port)
    print("ready", flush=True)
    step = 0
    while True:
        with jax.profiler.StepTraceAnnotation("train", step_num=step):
            params, loss = train_step(params, x, y)
            loss.block_until_ready()
            if trigger is not None and os.path.exists(trigger):
                time.sleep(SLOW_STEP_S)
        step += 1
        time.sleep(PAUSE_S)


if __name__ == "__main__":
    main()
