"""The README's Python snippets run as written (from the repository root), so the docs cannot
drift from the package."""

from __future__ import annotations

import os
import re

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def python_blocks(path: str) -> list[str]:
    with open(path, encoding="utf-8") as f:
        text = f.read()
    return re.findall(r"```python\n(.*?)```", text, flags=re.S)


def test_readme_python_snippets_run(tmp_path, monkeypatch):
    blocks = python_blocks(os.path.join(ROOT, "README.md"))
    # The Ray snippet needs a running cluster and a shared logdir (`ray.init(address="auto")`);
    # test_distributed.py runs the same call on a local cluster.
    local = [b for b in blocks if 'ray.init(address="auto")' not in b]
    assert len(local) >= 1 and len(blocks) - len(local) == 1, "the README's Python snippets changed"
    blocks = local
    # Relative profile paths are the repository's; files the snippets write go to a scratch
    # folder through the links below.
    monkeypatch.chdir(tmp_path)
    os.symlink(os.path.join(ROOT, "testdata"), tmp_path / "testdata")
    for i, block in enumerate(blocks):
        exec(compile(block, f"README.md python block {i}", "exec"), {})
    assert (tmp_path / "summary.html").read_text(encoding="utf-8").startswith("<!DOCTYPE html>")
