#!/usr/bin/env python3
"""Real TensorFlow/Keras captures on the CPU, made the way a Keras user makes them.

    python scripts/capture/keras_capture.py KIND OUT_DIR

Made with TensorFlow 2.21.0 (`tensorflow-cpu` from PyPI) and Keras 3.15.1, Python 3.11:
`python3 -m venv /work/venv-tf && /work/venv-tf/bin/pip install --no-cache-dir tensorflow-cpu`.

Trains a small image classifier (two convolutions with batch normalisation and pooling, two
dense layers, dropout; Adam, sparse categorical cross-entropy) with `model.fit` on a `tf.data`
pipeline of synthetic 32x32 RGB images, and captures a window of training steps as Keras's own
`keras.callbacks.TensorBoard(profile_batch=(first, last))` does (`ProfileBatches` below makes the
same profiler calls; the TensorBoard callback itself also needs the `tensorboard` package for its
summaries): `tf.profiler.experimental.start` before batch `first` (counted from 1),
`tf.profiler.experimental.stop` after batch `last`. Each batch is wrapped in
`tf.profiler.experimental.Trace("train", step_num=batch, _r=1)`, the step marker TensorFlow's
profiler guide asks for and that `tf.keras` 2.x's `fit` wrote itself: Keras 3's callback writes
`Trace("Profiled batch", step_num=batch)` instead, which XProf 2.24 does not take for a step
("No step time measured").
KIND (one process per capture, so that the warm-up capture sees the program's first trace):

- `warmup`: batches 1-2, the first steps of `fit`: tracing the train function, instantiating it,
  the first `tf.data` iterator, all inside the window (the warm-up capture).
- `steady`: batches 20-24 of a healthy pipeline (`map(num_parallel_calls=AUTOTUNE)`,
  `prefetch(AUTOTUNE)`), `jit_compile=False` (the TensorFlow executor).
- `input_bound`: batches 20-24 where the input is a Python generator (`from_generator`) that
  sleeps `SLOW_INPUT_S` per batch, mapped without parallelism and not prefetched: each step waits
  on `IteratorGetNext`.
- `xla`: batches 20-24 of the healthy pipeline with `model.compile(jit_compile=True)` (the train
  step compiled by XLA for the CPU).

Writes `OUT_DIR/<host>.xplane.pb` (the capture, copied unchanged from the callback's
`train/plugins/profile/<run>/`); the rest of the log directory is thrown away.
Deterministic seeds; timings are whatever the machine gives.
"""
from __future__ import annotations

import glob
import os
import shutil
import sys
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
import keras  # noqa: E402

KINDS = ("warmup", "steady", "input_bound", "xla")
BATCH = 64
IMAGES = 2048
CLASSES = 10
# Seconds the slow input's Python generator sleeps per batch (a slow reader, a decoder).
SLOW_INPUT_S = 0.06
# The steps each capture holds (Keras numbers batches from 1 in `profile_batch`).
WINDOWS = {"warmup": (1, 2), "steady": (20, 24), "input_bound": (20, 24), "xla": (20, 24)}


def model(jit_compile: bool) -> keras.Model:
    m = keras.Sequential(
        [
            keras.Input((32, 32, 3)),
            keras.layers.Conv2D(16, 3, padding="same", activation="relu"),
            keras.layers.BatchNormalization(),
            keras.layers.MaxPooling2D(),
            keras.layers.Conv2D(32, 3, padding="same", activation="relu"),
            keras.layers.MaxPooling2D(),
            keras.layers.Flatten(),
            keras.layers.Dense(64, activation="relu"),
            keras.layers.Dropout(0.2),
            keras.layers.Dense(CLASSES),
        ]
    )
    m.compile(
        optimizer=keras.optimizers.Adam(1e-3),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=["accuracy"],
        jit_compile=jit_compile,
    )
    return m


def augment(image, label):
    image = tf.cast(image, tf.float32) / 255.0
    image = tf.image.random_flip_left_right(image)
    image = tf.image.random_brightness(image, 0.1)
    return image, label


def healthy_input(images, labels) -> tf.data.Dataset:
    ds = tf.data.Dataset.from_tensor_slices((images, labels)).shuffle(IMAGES, seed=0).repeat()
    ds = ds.map(augment, num_parallel_calls=tf.data.AUTOTUNE)
    return ds.batch(BATCH, drop_remainder=True).prefetch(tf.data.AUTOTUNE)


def slow_input(images, labels) -> tf.data.Dataset:
    def batches():
        i = 0
        while True:
            time.sleep(SLOW_INPUT_S)  # a slow reader
            j = (i * BATCH) % IMAGES
            yield images[j : j + BATCH], labels[j : j + BATCH]
            i += 1

    spec = (
        tf.TensorSpec((BATCH, 32, 32, 3), tf.uint8),
        tf.TensorSpec((BATCH,), tf.int32),
    )
    ds = tf.data.Dataset.from_generator(batches, output_signature=spec)
    return ds.map(augment)  # no parallelism, no prefetch


class ProfileBatches(keras.callbacks.Callback):
    """The profiler calls of `keras.callbacks.TensorBoard(profile_batch=(first, last))`."""

    def __init__(self, logdir: str, first: int, last: int):
        super().__init__()
        self.logdir, self.first, self.last = logdir, first, last
        self.batch_count, self.tracing, self.trace = 0, False, None
        # As the TensorBoard callback: start and drop one trace first (profiler warm-up).
        tf.profiler.experimental.start(logdir="")
        tf.profiler.experimental.stop(save=False)

    def on_train_batch_begin(self, batch, logs=None):
        self.batch_count += 1
        if self.batch_count == self.first:
            tf.profiler.experimental.start(logdir=self.logdir)
            self.tracing = True
        if self.tracing:
            self.trace = tf.profiler.experimental.Trace("train", step_num=batch, _r=1)
            self.trace.__enter__()

    def on_train_batch_end(self, batch, logs=None):
        if self.tracing:
            self.trace.__exit__(None, None, None)
            self.trace = None
            if self.batch_count >= self.last:
                tf.profiler.experimental.stop()
                self.tracing = False


def main() -> None:
    if len(sys.argv) != 3 or sys.argv[1] not in KINDS:
        sys.exit(f"usage: keras_capture.py {{{','.join(KINDS)}}} OUT_DIR")
    kind, out_dir = sys.argv[1], sys.argv[2]
    keras.utils.set_random_seed(0)
    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, (IMAGES, 32, 32, 3), dtype=np.uint8)
    labels = rng.integers(0, CLASSES, (IMAGES,), dtype=np.int32)
    ds = slow_input(images, labels) if kind == "input_bound" else healthy_input(images, labels)
    m = model(jit_compile=kind == "xla")
    first, last = WINDOWS[kind]
    with tempfile.TemporaryDirectory() as logs:
        profile = ProfileBatches(os.path.join(logs, "train"), first, last)
        m.fit(ds, epochs=1, steps_per_epoch=last + 2, callbacks=[profile], verbose=0)
        found = sorted(glob.glob(os.path.join(logs, "**", "*.xplane.pb"), recursive=True))
        if len(found) != 1:
            sys.exit(f"expected one capture, found {found}")
        os.makedirs(out_dir, exist_ok=True)
        dst = os.path.join(out_dir, os.path.basename(found[0]))
        shutil.copyfile(found[0], dst)
    print(f"{kind}: {dst} ({os.path.getsize(dst)} bytes), tf {tf.__version__}, keras {keras.__version__}")


if __name__ == "__main__":
    main()
