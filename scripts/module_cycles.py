#!/usr/bin/env python3
"""Fail on any module cycle inside a crate of the workspace.

Usage:
    python3 scripts/module_cycles.py [--root DIR] [--allow CRATE:A~B[~C...]]... [-v]
    python3 scripts/module_cycles.py --self-test

The rule (ARCHITECTURE.md, "Invariants"): inside a crate, the modules that share a parent form
no cycle. If `a` names something of `b` and `b` names something of `a`, one of them is not
below the other, and the shared item belongs in the lower one (or in a small module of its own).

What is checked
---------------
* Crates: every directory of the workspace with a `Cargo.toml` and a `src/` (the root package
  included); each crate root there (`src/lib.rs`, `src/main.rs`, `src/bin/*.rs`) is one module
  tree. A crate is named by its directory (`faults`, `xplane`), the root package by its package
  name (`xlens`); a binary root adds `/NAME` (`xlens/main`). Tests, examples and benches are not
  crates here (examples/support is checked through `src/main.rs`, which includes it).
* Modules: the tree is read from the `mod` declarations, starting at the crate root:
  `mod x;` is `x.rs` or `x/mod.rs` beside a `lib.rs`/`main.rs`/`mod.rs`, `foo/x.rs` or
  `foo/x/mod.rs` beside a `foo.rs`; `#[path = "..."]` is honoured; an inline `mod x { ... }` is
  a module of its own. A module or item under `#[cfg(test)]` (or `#[cfg(all(test, ...))]`) is
  left out, with everything inside it: tests may import freely.
* References: a module refers to another when its code names it, in a `use` (nested braces,
  several lines, `self`, renames and globs included) or in a path anywhere in the code
  (`crate::b::x`, `super::x`, `self::x`, `b::x` for a child module or an imported name, and
  `$crate::` in macros). A path is resolved to the module that defines the item, following
  `use` imports and re-exports (`pub use`, glob imports), so a name reached through `lib.rs`'s
  re-export still counts as a reference to the module that defines it. Comments (doc
  comments and their examples), strings and attributes are not read.
* Granularity: siblings. A reference from `a::x::y` to `a::z::w` is an edge `a::x -> a::z`
  between the two children of their closest common ancestor `a`; a reference between a module
  and one of its own ancestors or descendants (a parent using its children, a child using its
  parent's items or re-exports that do not lead to a sibling) is not an edge. So
  `evidence <-> profile` (under the crate root), `render::html <-> render::step_chart` (under
  `render`) and `memory <-> module` are cycles; `render` using `render::html` is not.

Output: each cycle as the shortest cycle through the strongly connected set of siblings it
belongs to, with one reference (file:line and the path written) for each edge, and exit
status 1; else one summary line and exit status 0.

`--allow CRATE:A~B` accepts one known cycle: the strongly connected set of siblings must be
exactly {A, B} (full module paths from the crate root, e.g. `faults:render::html~render::step_chart`);
a larger tangle, or a cycle through other modules, still fails. An allowance that matches no
cycle is reported as stale (a note, not a failure) so that it can be removed.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from collections import deque
from dataclasses import dataclass, field

# ---------------------------------------------------------------------------------------------
# Lexing: identifiers and punctuation with their line numbers; comments, strings, characters,
# lifetimes and numbers dropped.

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@dataclass(frozen=True)
class Tok:
    kind: str  # "id" (a word), "p" (punctuation) or "s" (a string literal)
    text: str
    line: int


def _string_tok(src: str, start: int, end: int, line: int) -> Tok:
    """A string literal's token: its text is `"` and the raw contents (never equal to a word or
    a punctuation token), kept for `#[path = "..."]`."""
    body = src[start:end]
    body = body[body.index('"') + 1 : body.rindex('"')] if body.count('"') >= 2 else body
    return Tok("s", '"' + body, line)


def _skip_string(src: str, i: int, line: int) -> tuple[int, int]:
    """`src[i]` is the opening quote of a (byte) string; returns (index after it, line)."""
    i += 1
    n = len(src)
    while i < n:
        c = src[i]
        if c == "\\":
            if i + 1 < n and src[i + 1] == "\n":
                line += 1
            i += 2
            continue
        if c == "\n":
            line += 1
        elif c == '"':
            return i + 1, line
        i += 1
    return n, line


def _skip_raw_string(src: str, i: int, line: int) -> tuple[int, int] | None:
    """`src[i:]` starts at the `#`s or quote after `r`; returns (index after it, line) or None."""
    j = i
    while j < len(src) and src[j] == "#":
        j += 1
    if j >= len(src) or src[j] != '"':
        return None
    close = '"' + "#" * (j - i)
    end = src.find(close, j + 1)
    end = len(src) if end < 0 else end + len(close)
    return end, line + src.count("\n", j, end)


def lex(src: str) -> list[Tok]:
    toks: list[Tok] = []
    i, n, line = 0, len(src), 1
    while i < n:
        c = src[i]
        if c == "\n":
            line += 1
            i += 1
        elif c.isspace():
            i += 1
        elif src.startswith("//", i):
            j = src.find("\n", i)
            i = n if j < 0 else j
        elif src.startswith("/*", i):
            depth, i = 1, i + 2
            while i < n and depth:
                if src.startswith("/*", i):
                    depth, i = depth + 1, i + 2
                elif src.startswith("*/", i):
                    depth, i = depth - 1, i + 2
                else:
                    line += src[i] == "\n"
                    i += 1
        elif c == '"':
            start, first = i, line
            i, line = _skip_string(src, i, line)
            toks.append(_string_tok(src, start, i, first))
        elif c == "'":
            # A character literal ('a', '\n', '\u{1F600}') or a lifetime / label ('a).
            if i + 1 < n and src[i + 1] == "\\":
                j = i + 2
                while j < n and src[j] != "'":
                    j += 1
                i = j + 1
            elif i + 2 < n and src[i + 2] == "'":
                i += 3
            else:
                m = _IDENT.match(src, i + 1)
                if m and i + 1 + len(m.group(0)) < n and src[i + 1 + len(m.group(0))] == "'":
                    i = m.end() + 1  # a multi-byte char such as 'é' read as an identifier
                else:
                    i = m.end() if m else i + 1
        elif c.isdigit():
            j = i + 1
            while j < n and (src[j].isalnum() or src[j] == "_"):
                j += 1
            i = j
        elif c.isalpha() or c == "_":
            # Prefixed literals: b"..", r"..", r#".."#, br"..", c"..", b'x'; raw identifiers r#x.
            m = _IDENT.match(src, i)
            if m is None:
                i += 1  # a non-ASCII letter outside a string or comment: not a path
                continue
            word = m.group(0)
            j = m.end()
            if word in ("b", "c") and j < n and src[j] == '"':
                i, line = _skip_string(src, j, line)
                toks.append(Tok("s", '"', line))
                continue
            if word == "b" and j < n and src[j] == "'":
                k = j + 1
                if k < n and src[k] == "\\":
                    k += 1
                k += 1
                while k < n and src[k] != "'":
                    k += 1
                i = k + 1
                continue
            if word in ("r", "br", "cr") and j < n and src[j] in "#\"":
                skipped = _skip_raw_string(src, j, line)
                if skipped is not None:
                    first = line
                    i, line = skipped
                    toks.append(_string_tok(src, j, i, first))
                    continue
                if word == "r" and src[j] == "#":
                    m2 = _IDENT.match(src, j + 1)
                    if m2:
                        toks.append(Tok("id", m2.group(0), line))
                        i = m2.end()
                        continue
            toks.append(Tok("id", word, line))
            i = j
        elif src.startswith("::", i):
            toks.append(Tok("p", "::", line))
            i += 2
        else:
            toks.append(Tok("p", c, line))
            i += 1
    return toks


# ---------------------------------------------------------------------------------------------
# Module trees.

ModPath = tuple  # tuple[str, ...], () is the crate root

_ITEM_KEYWORDS = {"fn", "struct", "enum", "trait", "type", "union"}
_OPEN = {"(": ")", "[": "]", "{": "}"}
_CLOSE = {")", "]", "}"}


@dataclass
class Ref:
    """A path written in a module: where (file, line), how (text), from which module it counts."""

    origin: ModPath  # the module whose names a relative path starts from
    kind: str  # "crate", "super", "self" or "plain"
    supers: int  # how many `super::` (kind "super")
    segs: tuple  # the segments after the prefix
    file: str
    line: int
    text: str


@dataclass
class Module:
    path: ModPath
    file: str
    children: set = field(default_factory=set)
    defined: set = field(default_factory=set)
    imports: dict = field(default_factory=dict)  # name -> Ref (the imported path)
    globs: list = field(default_factory=list)  # Refs of `use x::*`
    refs: list = field(default_factory=list)  # every path written here


def _match(toks: list[Tok], i: int) -> int:
    """Index of the bracket closing the one at `i` (or len(toks))."""
    depth = 0
    for j in range(i, len(toks)):
        t = toks[j]
        if t.kind == "p":
            if t.text in _OPEN:
                depth += 1
            elif t.text in _CLOSE:
                depth -= 1
                if depth == 0:
                    return j
    return len(toks)


def _is_test_cfg(attr: list[Tok]) -> bool:
    """`#[cfg(test)]` or `#[cfg(all(test, ...))]`: the tokens inside the brackets."""
    words = [t.text for t in attr]
    if words[:2] != ["cfg", "("]:
        return False
    inner = words[2:-1]
    if inner == ["test"]:
        return True
    if inner[:2] == ["all", "("]:
        depth, top = 0, []
        for w in inner[2:-1]:
            if w in _OPEN:
                depth += 1
            elif w in _CLOSE:
                depth -= 1
            elif depth == 0:
                top.append(w)
        return "test" in top
    return False


def _item_end(toks: list[Tok], i: int, nested: bool) -> int:
    """Index after the item (or field / statement) that starts at `i`."""
    depth = 0
    n = len(toks)
    while i < n:
        t = toks[i]
        if t.kind == "p":
            if t.text in _OPEN:
                depth += 1
            elif t.text in _CLOSE:
                depth -= 1
                if depth < 0:
                    return i
                if depth == 0 and t.text == "}":
                    if i + 1 < n and toks[i + 1].text in (";", ","):
                        return i + 2
                    return i + 1
            elif depth == 0 and (t.text == ";" or (nested and t.text == ",")):
                return i + 1
        i += 1
    return n


class CrateReader:
    """Reads one crate's module tree from its root file."""

    def __init__(self, root_file: str, display_root: str):
        self.modules: dict[ModPath, Module] = {}
        self.display_root = display_root
        self.errors: list[str] = []
        self._load_file((), root_file, mod_rs=True)

    def _rel(self, path: str) -> str:
        return os.path.relpath(path, self.display_root)

    def _load_file(self, mpath: ModPath, file: str, mod_rs: bool) -> None:
        try:
            with open(file, encoding="utf-8") as f:
                src = f.read()
        except OSError as e:
            self.errors.append(f"{self._rel(file)}: cannot read ({e.strerror})")
            return
        toks = lex(src)
        base = os.path.dirname(file)
        mod_dir = base if mod_rs else os.path.join(base, os.path.splitext(os.path.basename(file))[0])
        self._read_module(mpath, file, toks, 0, len(toks), mod_dir, file_dir=base)

    def _read_module(
        self, mpath: ModPath, file: str, toks: list[Tok], start: int, end: int, mod_dir: str, file_dir: str | None
    ) -> None:
        module = self.modules.setdefault(mpath, Module(mpath, self._rel(file)))
        rel = self._rel(file)
        depth = 0
        i = start
        pending_attrs: list[list[Tok]] = []
        pending_path: str | None = None
        while i < end:
            t = toks[i]
            # Attributes: `#[...]` (outer) and `#![...]` (inner, skipped).
            if t.text == "#" and t.kind == "p":
                j = i + 1
                inner = j < end and toks[j].text == "!"
                if inner:
                    j += 1
                if j < end and toks[j].text == "[":
                    close = _match(toks, j)
                    attr = toks[j + 1 : close]
                    if not inner:
                        pending_attrs.append(attr)
                        if len(attr) == 3 and attr[0].text == "path" and attr[2].kind == "s":
                            pending_path = attr[2].text[1:]
                    i = close + 1
                    continue
            if pending_attrs and any(_is_test_cfg(a) for a in pending_attrs):
                pending_attrs, pending_path = [], None
                i = _item_end(toks, i, nested=depth > 0)
                continue
            attrs_path, pending_attrs, pending_path = pending_path, [], None
            if t.kind == "s":
                i += 1
                continue
            if t.kind == "p":
                if t.text == "{":
                    depth += 1
                elif t.text == "}":
                    depth -= 1
                i += 1
                continue
            word = t.text
            nxt = toks[i + 1] if i + 1 < end else None
            if depth == 0 and word == "mod" and nxt is not None and nxt.kind == "id":
                name = nxt.text
                after = toks[i + 2] if i + 2 < end else None
                child = mpath + (name,)
                module.children.add(name)
                if after is not None and after.text == "{":
                    close = _match(toks, i + 2)
                    if attrs_path is not None:
                        child_dir = os.path.join(mod_dir, attrs_path)
                    else:
                        child_dir = os.path.join(mod_dir, name)
                    self._read_module(child, file, toks, i + 3, close, child_dir, file_dir=None)
                    i = close + 1
                    continue
                if attrs_path is not None:
                    where = file_dir if file_dir is not None else mod_dir
                    self._load_file(child, os.path.normpath(os.path.join(where, attrs_path)), mod_rs=True)
                else:
                    flat = os.path.join(mod_dir, name + ".rs")
                    nested = os.path.join(mod_dir, name, "mod.rs")
                    if os.path.exists(flat):
                        self._load_file(child, flat, mod_rs=False)
                    elif os.path.exists(nested):
                        self._load_file(child, nested, mod_rs=True)
                    else:
                        self.errors.append(f"{rel}:{t.line}: no file for `mod {name};`")
                i += 3
                continue
            if word == "use" and (i == start or toks[i - 1].text not in ("::", ".")):
                i = self._read_use(module, rel, toks, i + 1, end)
                continue
            if depth == 0 and nxt is not None and nxt.kind == "id":
                if word in _ITEM_KEYWORDS or (word in ("const", "static") and nxt.text not in ("fn", "_", "mut", "unsafe", "async", "extern")):
                    module.defined.add(nxt.text)
                elif word == "static" and nxt.text == "mut" and i + 2 < end:
                    module.defined.add(toks[i + 2].text)
            if depth == 0 and word == "macro_rules" and nxt is not None and nxt.text == "!" and i + 2 < end:
                module.defined.add(toks[i + 2].text)
            # A path: `crate::`, `$crate::`, `super::`, `self::` or `name::`, not after `::`/`.`.
            if nxt is not None and nxt.text == "::" and (i == start or toks[i - 1].text not in ("::", ".")):
                i = self._read_path(module, rel, toks, i, end)
                continue
            i += 1

    def _read_path(self, module: Module, rel: str, toks: list[Tok], i: int, end: int) -> int:
        """Reads `a::b::c` starting at `i`; returns the index after it."""
        segs = [toks[i].text]
        line = toks[i].line
        j = i + 1
        while j + 1 < end and toks[j].text == "::" and toks[j + 1].kind == "id":
            segs.append(toks[j + 1].text)
            j += 2
        ref = _make_ref(module.path, segs, rel, line)
        if ref is not None:
            module.refs.append(ref)
        return j

    def _read_use(self, module: Module, rel: str, toks: list[Tok], i: int, end: int) -> int:
        """Reads a use tree after `use`; records imports and references; returns the index after `;`."""
        semi = i
        depth = 0
        while semi < end:
            t = toks[semi].text
            if t in _OPEN:
                depth += 1
            elif t in _CLOSE:
                depth -= 1
            elif t == ";" and depth == 0:
                break
            semi += 1
        if i < semi and toks[i].text == "::":
            return semi + 1  # `use ::extern_crate::...`
        for segs, alias, glob, line in _expand_use(toks, i, semi):
            if not segs:
                continue
            text = "::".join(segs) + ("::*" if glob else "")
            ref = _make_ref(module.path, segs, rel, line, text="use " + text)
            if ref is None:
                continue
            module.refs.append(ref)
            if glob:
                module.globs.append(ref)
            else:
                name = alias if alias is not None else segs[-1]
                if name in ("crate", "super", "self"):
                    continue
                if name != "_":
                    module.imports[name] = ref
        return semi + 1


def _make_ref(origin: ModPath, segs: list[str], rel: str, line: int, text: str | None = None) -> Ref | None:
    text = text if text is not None else "::".join(segs)
    head = segs[0]
    if head == "crate":
        return Ref(origin, "crate", 0, tuple(segs[1:]), rel, line, text)
    if head == "super":
        k = 0
        while k < len(segs) and segs[k] == "super":
            k += 1
        return Ref(origin, "super", k, tuple(segs[k:]), rel, line, text)
    if head == "self":
        return Ref(origin, "self", 0, tuple(segs[1:]), rel, line, text)
    if head == "Self":
        return None
    return Ref(origin, "plain", 0, tuple(segs), rel, line, text)


def _expand_use(toks: list[Tok], i: int, end: int, prefix: tuple = ()):
    """Yields (segments, alias, is_glob, line) for each leaf of the use tree in toks[i:end]."""
    segs = list(prefix)
    line = toks[i].line if i < end else 0
    j = i
    while j < end:
        t = toks[j]
        if t.text == "{":
            close = _match(toks, j)
            # Split the group on top-level commas.
            k = j + 1
            part_start = k
            depth = 0
            while k < close:
                w = toks[k].text
                if w in _OPEN:
                    depth += 1
                elif w in _CLOSE:
                    depth -= 1
                elif w == "," and depth == 0:
                    if part_start < k:
                        yield from _expand_use(toks, part_start, k, tuple(segs))
                    part_start = k + 1
                k += 1
            if part_start < close:
                yield from _expand_use(toks, part_start, close, tuple(segs))
            return
        if t.text == "*":
            yield tuple(segs), None, True, line
            return
        if t.text == "::":
            j += 1
            continue
        if t.kind == "id" and t.text == "as" and segs:
            alias = toks[j + 1].text if j + 1 < end else None
            yield _use_self(segs), alias, False, line
            return
        if t.kind == "id":
            segs.append(t.text)
            line = t.line
            j += 1
            continue
        j += 1  # anything else (attributes inside groups are rare) is skipped
    if segs:
        yield _use_self(segs), None, False, line


def _use_self(segs: list[str]) -> tuple:
    """`use a::b::{self}` imports `a::b` under the name `b`."""
    if len(segs) > 1 and segs[-1] == "self":
        return tuple(segs[:-1])
    return tuple(segs)


# ---------------------------------------------------------------------------------------------
# Resolution: a written path to the module that defines what it names.


class Resolver:
    def __init__(self, modules: dict[ModPath, Module]):
        self.modules = modules

    def absolute(self, ref: Ref, depth: int = 0) -> tuple | None:
        """The path from the crate root that `ref` writes, or None (another crate, std, a local)."""
        if ref.kind == "crate":
            return ref.segs
        if ref.kind == "self":
            return ref.origin + ref.segs
        if ref.kind == "super":
            if ref.supers > len(ref.origin):
                return None
            return ref.origin[: len(ref.origin) - ref.supers] + ref.segs
        # A plain path starts with a name in scope in its module: a child module, an import or
        # an item of the module itself; anything else is another crate, std or a local.
        if not ref.segs:
            return None
        module = self.modules.get(ref.origin)
        if module is None:
            return None
        head, rest = ref.segs[0], ref.segs[1:]
        if head in module.children:
            return ref.origin + ref.segs
        imp = module.imports.get(head)
        if imp is not None and imp is not ref and depth < 16:
            base = self.absolute(imp, depth + 1)
            return None if base is None else base + rest
        if head in module.defined:
            return ref.origin + ref.segs
        return None

    def defining_module(self, path: tuple, depth: int = 0) -> ModPath | None:
        """The deepest module on `path` (re-exports followed) that holds what it names."""
        cur: ModPath = ()
        for k, seg in enumerate(path):
            module = self.modules.get(cur)
            if module is None:
                return cur
            if seg in module.children:
                cur = cur + (seg,)
                continue
            if seg in module.defined:
                return cur
            imp = module.imports.get(seg)
            if imp is not None and depth < 16:
                base = self.absolute(imp, depth + 1)
                if base is None:
                    return cur  # a re-export of another crate's item
                return self.defining_module(base + tuple(path[k + 1 :]), depth + 1)
            for glob in module.globs:
                if depth >= 16:
                    break
                base = self.absolute(glob, depth + 1)
                if base is None:
                    continue
                target = self.defining_module(base, depth + 1)
                tm = self.modules.get(target) if target is not None else None
                if tm is not None and tuple(base) == target and (
                    seg in tm.children or seg in tm.defined or seg in tm.imports
                ):
                    return self.defining_module(base + tuple(path[k:]), depth + 1)
            return cur
        return cur


# ---------------------------------------------------------------------------------------------
# Graph: edges between siblings, cycles.


@dataclass
class Edge:
    file: str
    line: int
    text: str


def sibling_edges(modules: dict[ModPath, Module]) -> dict[ModPath, dict[tuple, Edge]]:
    """For each parent module, edges (a, b) between its children, each with its first reference."""
    resolver = Resolver(modules)
    by_parent: dict[ModPath, dict[tuple, Edge]] = {}
    for mpath in sorted(modules):
        module = modules[mpath]
        for ref in module.refs:
            path = resolver.absolute(ref)
            if path is None:
                continue
            target = resolver.defining_module(path)
            if target is None or target == mpath:
                continue
            k = 0
            while k < len(mpath) and k < len(target) and mpath[k] == target[k]:
                k += 1
            if k == len(mpath) or k == len(target):
                continue  # one is an ancestor of the other
            parent = mpath[:k]
            a, b = mpath[: k + 1], target[: k + 1]
            edges = by_parent.setdefault(parent, {})
            edge = Edge(ref.file, ref.line, ref.text)
            old = edges.get((a, b))
            if old is None or (edge.file, edge.line) < (old.file, old.line):
                edges[(a, b)] = edge
    return by_parent


def strongly_connected(nodes: list, succ: dict) -> list[list]:
    """Tarjan's algorithm (iterative); components of more than one node, each sorted."""
    index: dict = {}
    low: dict = {}
    on_stack: set = set()
    stack: list = []
    out: list[list] = []
    counter = 0
    for root in nodes:
        if root in index:
            continue
        work = [(root, iter(sorted(succ.get(root, ()))))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            v, it = work[-1]
            advanced = False
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(succ.get(w, ())))))
                    advanced = True
                    break
                if w in on_stack:
                    low[v] = min(low[v], index[w])
            if advanced:
                continue
            work.pop()
            if work:
                u = work[-1][0]
                low[u] = min(low[u], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return sorted(out)


def shortest_cycle(component: list, succ: dict) -> list:
    """The shortest cycle inside the component (first node repeated at the end)."""
    members = set(component)
    best: list | None = None
    for start in component:
        prev = {start: None}
        queue = deque([start])
        found = None
        while queue and found is None:
            v = queue.popleft()
            for w in sorted(succ.get(v, ())):
                if w not in members:
                    continue
                if w == start:
                    found = v
                    break
                if w not in prev:
                    prev[w] = v
                    queue.append(w)
        if found is None:
            continue
        path = [start]
        v = found
        while v is not None and v != start:
            path.append(v)
            v = prev[v]
        cycle = [start] + list(reversed(path[1:])) + [start]
        if best is None or len(cycle) < len(best):
            best = cycle
    return best or []


def name(mpath: ModPath) -> str:
    return "::".join(mpath) if mpath else "crate"


# ---------------------------------------------------------------------------------------------
# Workspace.


def _package_name(cargo_toml: str) -> str | None:
    try:
        with open(cargo_toml, encoding="utf-8") as f:
            text = f.read()
    except OSError:
        return None
    m = re.search(r"^\[package\]\s*$(.*?)(?=^\[|\Z)", text, re.M | re.S)
    if not m:
        return None
    n = re.search(r'^\s*name\s*=\s*"([^"]+)"', m.group(1), re.M)
    return n.group(1) if n else None


def crate_roots(root: str) -> list[tuple[str, str]]:
    """(crate label, root file) for every crate root in the workspace at `root`."""
    out = []
    skip = {"target", ".git", "node_modules"}
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in skip and not d.startswith("."))
        if "Cargo.toml" not in filenames or not os.path.isdir(os.path.join(dirpath, "src")):
            continue
        rel = os.path.relpath(dirpath, root)
        label = _package_name(os.path.join(dirpath, "Cargo.toml")) if rel == "." else rel
        label = label or rel
        src = os.path.join(dirpath, "src")
        if os.path.exists(os.path.join(src, "lib.rs")):
            out.append((label, os.path.join(src, "lib.rs")))
        if os.path.exists(os.path.join(src, "main.rs")):
            out.append((f"{label}/main", os.path.join(src, "main.rs")))
        bindir = os.path.join(src, "bin")
        if os.path.isdir(bindir):
            for entry in sorted(os.listdir(bindir)):
                p = os.path.join(bindir, entry)
                if entry.endswith(".rs"):
                    out.append((f"{label}/{entry[:-3]}", p))
                elif os.path.exists(os.path.join(p, "main.rs")):
                    out.append((f"{label}/{entry}", os.path.join(p, "main.rs")))
    return out


@dataclass
class Cycle:
    crate: str
    parent: ModPath
    component: list
    cycle: list
    edges: dict

    def key(self) -> tuple:
        return (self.crate, tuple(sorted(self.component)))

    def render(self) -> str:
        under = "the crate root" if not self.parent else f"`{name(self.parent)}`"
        lines = [f"{self.crate}: module cycle under {under}: " + " -> ".join(name(m) for m in self.cycle)]
        for a, b in zip(self.cycle, self.cycle[1:]):
            e = self.edges[(a, b)]
            lines.append(f"    {name(a)} -> {name(b)}: {e.file}:{e.line}  {e.text}")
        if len(self.component) > len(self.cycle) - 1:
            lines.append("    tangled together: " + ", ".join(name(m) for m in self.component))
        return "\n".join(lines)


def find_cycles(root: str) -> tuple[list[Cycle], dict, list[str]]:
    cycles: list[Cycle] = []
    stats = {"crates": 0, "modules": 0, "edges": 0}
    errors: list[str] = []
    seen: set = set()
    for label, root_file in crate_roots(root):
        reader = CrateReader(root_file, root)
        errors.extend(f"{label}: {e}" for e in reader.errors)
        stats["crates"] += 1
        stats["modules"] += len(reader.modules)
        for parent, edges in sorted(sibling_edges(reader.modules).items()):
            stats["edges"] += len(edges)
            succ: dict = {}
            for a, b in edges:
                succ.setdefault(a, set()).add(b)
            nodes = sorted({a for a, _ in edges} | {b for _, b in edges})
            for comp in strongly_connected(nodes, succ):
                cyc = shortest_cycle(comp, succ)
                c = Cycle(label, parent, comp, cyc, edges)
                files = tuple(sorted(edges[(a, b)].file for a, b in zip(cyc, cyc[1:])))
                if files in seen:
                    continue  # the same files reached from another crate root (a `#[path]` include)
                seen.add(files)
                cycles.append(c)
    return cycles, stats, errors


def parse_allow(spec: str) -> tuple:
    crate, sep, mods = spec.partition(":")
    parts = mods.split("~")
    if not sep or not crate or len(parts) < 2 or any(not p for p in parts):
        raise ValueError(f"--allow {spec!r}: expected CRATE:A~B (module paths from the crate root)")
    paths = [tuple(p.split("::")) for p in parts]
    parents = {p[:-1] for p in paths}
    if len(parents) != 1 or len(set(paths)) != len(paths):
        raise ValueError(f"--allow {spec!r}: the modules must be distinct siblings (one parent)")
    return (crate, tuple(sorted(paths)))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--root", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    ap.add_argument("--allow", action="append", default=[], metavar="CRATE:A~B", help="accept exactly this cycle")
    ap.add_argument("--self-test", action="store_true", help="run the script's own tests")
    ap.add_argument("-v", "--verbose", action="store_true", help="print every edge between siblings")
    args = ap.parse_args(argv)
    if args.self_test:
        import unittest

        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        import test_module_cycles

        suite = unittest.defaultTestLoader.loadTestsFromModule(test_module_cycles)
        result = unittest.TextTestRunner(verbosity=1).run(suite)
        return 0 if result.wasSuccessful() and result.testsRun > 0 else 1
    try:
        allowed = {parse_allow(a): a for a in args.allow}
    except ValueError as e:
        print(f"module_cycles: {e}", file=sys.stderr)
        return 2
    root = os.path.normpath(args.root)
    if args.verbose:
        for label, root_file in crate_roots(root):
            reader = CrateReader(root_file, root)
            for parent, edges in sorted(sibling_edges(reader.modules).items()):
                for (a, b), e in sorted(edges.items()):
                    print(f"{label}: {name(a)} -> {name(b)}  ({e.file}:{e.line}  {e.text})")
    cycles, stats, errors = find_cycles(root)
    for e in errors:
        print(f"module_cycles: warning: {e}", file=sys.stderr)
    if stats["crates"] == 0:
        print(f"module_cycles: no crate found under {root}", file=sys.stderr)
        return 2
    failing, used = [], set()
    for c in cycles:
        if c.key() in allowed:
            used.add(c.key())
            print(f"allowed (pending, --allow {allowed[c.key()]}):\n" + c.render())
        else:
            failing.append(c)
    for key, spec in allowed.items():
        if key not in used:
            print(f"module_cycles: note: --allow {spec} matches no cycle any more; remove it")
    for c in failing:
        print(c.render())
    summary = (
        f"{stats['crates']} crate roots, {stats['modules']} modules, "
        f"{stats['edges']} dependencies between sibling modules"
    )
    if failing:
        print(f"module_cycles: {len(failing)} module cycle(s) ({summary})")
        return 1
    print(f"module_cycles: no module cycle ({summary}; {len(used)} allowed)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
