#!/usr/bin/env python3
"""Real PyTorch/XLA captures on the CPU, made the way a PyTorch/XLA user makes them.

    PJRT_DEVICE=CPU python scripts/capture/ptxla_capture.py KIND OUT_DIR

Made with torch 2.8.0 and torch_xla 2.8.0 from PyPI, Python 3.11:
`python3 -m venv /work/venv-ptxla && /work/venv-ptxla/bin/pip install torch==2.8.0 torch_xla==2.8.0`,
run with `PJRT_DEVICE=CPU` (the script sets it when unset): XLA:CPU through PJRT, no accelerator.

Trains a small MLP classifier (784 -> 512 -> 512 -> 10, GELU, LayerNorm; AdamW, cross-entropy)
on synthetic 28x28 "images", batch 64, with the loop of torch_xla's own examples: a
`torch.utils.data.DataLoader`, each step wrapped in
`torch_xla.debug.profiler.StepTrace("train_step", step_num=i)` (the step marker torch_xla's
profiling guide asks for; it is a root TraceMe, `_r=1`, and calls `xm.mark_step()` on exit, so
every step is one `SyncTensorsGraph` program). The capture is taken in-process with
`xp.start_server(PORT)` and `xp.start_trace(logdir)` / `xp.stop_trace()` around the steps of the
window (torch_xla's `start_trace` writes the capture under `logdir/plugins/profile/<run>/`).

KIND (one process per capture, so that the warm-up capture sees the program's first steps):

- `steady`: steps 8-15 of a healthy loop: the batches come through
  `torch_xla.distributed.parallel_loader.MpDeviceLoader`, which copies the next batch to the
  device on a background thread while the step runs; the first 8 steps (warm-up, compilation)
  run before the trace starts.
- `warmup`: steps 0-5, the first steps of the program with the trace started before any: the
  `SyncTensorsGraph` of the first step (and of the second, whose optimizer state now exists) is
  traced and compiled inside the window (`XLAGraphExecutor::Compile`, `PjRtComputationClient::Compile`).
- `input_bound`: steps 8-15 where each batch comes from a `DataLoader` with `num_workers=0`
  whose dataset does slow host-side preprocessing (`SLOW_INPUT_S` of sleep per batch, a slow
  reader or decoder) and is copied with `.to(device)` inside the step, no `MpDeviceLoader`:
  the host prepares each batch while the device has nothing to run.

Writes `OUT_DIR/<host>.xplane.pb` (the capture, copied unchanged from the profiler's
`plugins/profile/<run>/`); the rest of the log directory is thrown away. Deterministic seeds;
timings are whatever the machine gives.
"""
from __future__ import annotations

import glob
import os
import shutil
import sys
import tempfile
import time

os.environ.setdefault("PJRT_DEVICE", "CPU")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch_xla  # noqa: E402
import torch_xla.core.xla_model as xm  # noqa: E402
import torch_xla.debug.profiler as xp  # noqa: E402
import torch_xla.distributed.parallel_loader as pl  # noqa: E402

KINDS = ("steady", "warmup", "input_bound")
BATCH = 64
SAMPLES = 4096
FEATURES = 28 * 28
CLASSES = 10
PORT = 9012
# Seconds of host-side preprocessing per batch in `input_bound` (a slow reader, a decoder).
SLOW_INPUT_S = 0.05
# (first, last) step of each capture, counted from 0; the steps before `first` run untraced.
WINDOWS = {"steady": (8, 15), "warmup": (0, 5), "input_bound": (8, 15)}


class Mlp(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(FEATURES, 512),
            nn.GELU(),
            nn.LayerNorm(512),
            nn.Linear(512, 512),
            nn.GELU(),
            nn.Linear(512, CLASSES),
        )

    def forward(self, x):
        return self.net(x.flatten(1))


class SlowDataset(torch.utils.data.Dataset):
    """Whole batches, each prepared on the host with `SLOW_INPUT_S` of work (a slow reader)."""

    def __init__(self, images, labels):
        self.images, self.labels = images, labels

    def __len__(self):
        return len(self.images) // BATCH

    def __getitem__(self, i):
        time.sleep(SLOW_INPUT_S)  # reading and decoding the batch
        s = slice(i * BATCH, (i + 1) * BATCH)
        return self.images[s].float() / 255.0, self.labels[s]


def loader(kind, images, labels, device):
    if kind == "input_bound":
        # batch_size=None: the dataset yields whole batches; num_workers=0: in the training process.
        return torch.utils.data.DataLoader(SlowDataset(images, labels), batch_size=None, num_workers=0)
    ds = torch.utils.data.TensorDataset(images.float() / 255.0, labels)
    dl = torch.utils.data.DataLoader(ds, batch_size=BATCH, shuffle=True, drop_last=True)
    return pl.MpDeviceLoader(dl, device)


def main() -> None:
    if len(sys.argv) != 3 or sys.argv[1] not in KINDS:
        sys.exit(f"usage: ptxla_capture.py {{{','.join(KINDS)}}} OUT_DIR")
    kind, out_dir = sys.argv[1], sys.argv[2]
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    images = torch.randint(0, 256, (SAMPLES, 1, 28, 28), dtype=torch.uint8, generator=g)
    labels = torch.randint(0, CLASSES, (SAMPLES,), generator=g)
    device = torch_xla.device()
    model = Mlp().to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    loss_fn = nn.CrossEntropyLoss()
    first, last = WINDOWS[kind]
    server = xp.start_server(PORT)  # noqa: F841 (the profiler server must live while tracing)
    with tempfile.TemporaryDirectory() as logs:
        tracing = False
        for step, (x, y) in enumerate(loader(kind, images, labels, device)):
            if step == first:
                xm.wait_device_ops()
                xp.start_trace(logs)
                tracing = True
            with xp.StepTrace("train_step", step_num=step):
                if kind == "input_bound":
                    x, y = x.to(device), y.to(device)
                optimizer.zero_grad()
                loss = loss_fn(model(x), y)
                loss.backward()
                optimizer.step()
            if step == last:
                xm.wait_device_ops()
                xp.stop_trace()
                tracing = False
                break
        assert not tracing
        print(f"{kind}: loss {loss.item():.4f} after step {last}")
        found = sorted(glob.glob(os.path.join(logs, "**", "*.xplane.pb"), recursive=True))
        if len(found) != 1:
            sys.exit(f"expected one capture, found {found}")
        os.makedirs(out_dir, exist_ok=True)
        dst = os.path.join(out_dir, os.path.basename(found[0]))
        shutil.copyfile(found[0], dst)
    print(f"{kind}: {dst} ({os.path.getsize(dst)} bytes), torch {torch.__version__}, "
          f"torch_xla {torch_xla.__version__}")


if __name__ == "__main__":
    main()
