#!/usr/bin/env python3
"""Tests of scripts/module_cycles.py over tiny crates written to a temporary directory.

Run with `python3 scripts/module_cycles.py --self-test` (or `python3 -m unittest` from scripts/).
Each test writes a workspace, runs the checker on it and looks at the exit status and output, so
a checker that stopped seeing references would fail here rather than pass CI silently.
"""

from __future__ import annotations

import contextlib
import io
import os
import sys
import tempfile
import textwrap
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import module_cycles  # noqa: E402


def write_crate(root: str, name: str, files: dict[str, str]) -> None:
    base = os.path.join(root, name)
    os.makedirs(os.path.join(base, "src"), exist_ok=True)
    with open(os.path.join(base, "Cargo.toml"), "w", encoding="utf-8") as f:
        f.write(f'[package]\nname = "{name}"\nversion = "0.1.0"\n')
    for rel, text in files.items():
        path = os.path.join(base, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", encoding="utf-8") as f:
            f.write(textwrap.dedent(text).lstrip("\n"))


def run(root: str, *args: str) -> tuple[int, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = module_cycles.main(["--root", root, *args])
    return rc, out.getvalue() + err.getvalue()


# A crate whose modules `a` and `b` name each other: `a` through a multi-line use group, `b`
# through a path in an expression.
CYCLE = {
    "src/lib.rs": """
        //! Demo.
        mod a;
        mod b;
        pub use a::Thing;
    """,
    "src/a.rs": """
        use crate::{
            b::{self, Other},
        };
        pub struct Thing;
        pub fn f() -> Other { b::make() }
    """,
    "src/b.rs": """
        pub struct Other;
        pub fn make() -> Other {
            let _ = crate::a::Thing;
            Other
        }
    """,
}


class CycleTests(unittest.TestCase):
    def setUp(self) -> None:
        self.tmp = tempfile.TemporaryDirectory()
        self.root = self.tmp.name

    def tearDown(self) -> None:
        self.tmp.cleanup()

    def test_known_cycle_fails_with_both_references(self) -> None:
        write_crate(self.root, "demo", CYCLE)
        rc, out = run(self.root)
        self.assertEqual(rc, 1, out)
        self.assertIn("demo: module cycle under the crate root: a -> b -> a", out)
        self.assertIn("a -> b: demo/src/a.rs:2", out)
        self.assertIn("b -> a: demo/src/b.rs:3  crate::a::Thing", out)

    def test_no_cycle_passes(self) -> None:
        files = dict(CYCLE)
        files["src/b.rs"] = "pub struct Other;\npub fn make() -> Other { Other }\n"
        write_crate(self.root, "demo", files)
        rc, out = run(self.root)
        self.assertEqual(rc, 0, out)
        self.assertIn("no module cycle", out)

    def test_reexport_through_lib_counts(self) -> None:
        # `b` names `a`'s item through the crate root's `pub use a::Thing`.
        files = dict(CYCLE)
        files["src/b.rs"] = "use crate::Thing;\npub struct Other;\npub fn make() -> Other { Other }\n"
        write_crate(self.root, "demo", files)
        rc, out = run(self.root)
        self.assertEqual(rc, 1, out)
        self.assertIn("b -> a: demo/src/b.rs:1  use crate::Thing", out)

    def test_glob_reexport_counts(self) -> None:
        write_crate(
            self.root,
            "demo",
            {
                "src/lib.rs": "mod a;\nmod b;\npub use a::*;\n",
                "src/a.rs": "pub struct Thing;\npub fn f() { crate::b::g() }\n",
                "src/b.rs": "pub fn g() { let _ = crate::Thing; }\n",
            },
        )
        rc, out = run(self.root)
        self.assertEqual(rc, 1, out)
        self.assertIn("b -> a", out)

    def test_test_code_comments_and_strings_do_not_count(self) -> None:
        files = dict(CYCLE)
        files["src/b.rs"] = """
            // crate::a::Thing in a comment
            /* and crate::a::Thing /* nested */ here */
            pub struct Other;
            pub fn make() -> Other {
                let _ = "crate::a::Thing";
                let _ = r#"crate::a::Thing "quoted""#;
                let _ = ('"', b'\\'', '\\u{1F600}');
                Other
            }
            pub fn keep<'a>(x: &'a str) -> &'a str { x }
            #[cfg(test)]
            fn helper() { let _ = crate::a::Thing; }
            #[cfg(test)]
            mod tests {
                use crate::a::Thing;
                #[test]
                fn t() { let _ = Thing; }
            }
        """
        write_crate(self.root, "demo", files)
        rc, out = run(self.root)
        self.assertEqual(rc, 0, out)

    def test_cfg_not_test_still_counts(self) -> None:
        files = dict(CYCLE)
        files["src/b.rs"] = """
            pub struct Other;
            #[cfg(not(test))]
            pub fn make() -> Other { let _ = crate::a::Thing; Other }
        """
        write_crate(self.root, "demo", files)
        rc, _ = run(self.root)
        self.assertEqual(rc, 1)

    def test_siblings_under_a_parent_with_super_paths_and_mod_rs(self) -> None:
        write_crate(
            self.root,
            "demo",
            {
                "src/lib.rs": "pub mod render;\n",
                "src/render/mod.rs": "mod html;\nmod chart;\npub use html::page;\n",
                "src/render/html.rs": "use super::chart;\npub struct Layout;\npub fn page() { chart::draw() }\n",
                "src/render/chart.rs": "pub fn draw() { let _ = super::html::Layout; }\n",
            },
        )
        rc, out = run(self.root)
        self.assertEqual(rc, 1, out)
        self.assertIn("module cycle under `render`: render::chart -> render::html -> render::chart", out)

    def test_parent_and_child_are_not_a_cycle(self) -> None:
        write_crate(
            self.root,
            "demo",
            {
                "src/lib.rs": "pub mod render;\npub struct Theme;\n",
                "src/render.rs": "mod html;\npub fn go() { html::page() }\npub struct Layout;\n",
                "src/render/html.rs": "pub fn page() { let _ = (super::Layout, crate::Theme); }\n",
            },
        )
        rc, out = run(self.root)
        self.assertEqual(rc, 0, out)

    def test_nested_flat_file_layout_and_inline_modules(self) -> None:
        # `foo.rs` + `foo/bar.rs`, an inline module, and a `#[path]` module.
        write_crate(
            self.root,
            "demo",
            {
                "src/lib.rs": """
                    mod foo;
                    #[path = "elsewhere/other.rs"]
                    mod other;
                    mod inline {
                        pub fn f() { crate::foo::bar::g() }
                    }
                """,
                "src/foo.rs": "pub mod bar;\n",
                "src/foo/bar.rs": "pub fn g() { crate::other::h() }\n",
                "src/elsewhere/other.rs": "pub fn h() { crate::inline::f() }\n",
            },
        )
        rc, out = run(self.root)
        self.assertEqual(rc, 1, out)
        self.assertIn("foo -> other -> inline -> foo", out)
        self.assertIn("other -> inline: demo/src/elsewhere/other.rs:1", out)

    def test_allow_is_exact(self) -> None:
        write_crate(self.root, "demo", CYCLE)
        rc, out = run(self.root, "--allow", "demo:a~b")
        self.assertEqual(rc, 0, out)
        self.assertIn("allowed (pending", out)
        # Another crate's, or another pair's, allowance does not cover it.
        rc, out = run(self.root, "--allow", "other:a~b")
        self.assertEqual(rc, 1, out)
        self.assertIn("matches no cycle", out)

    def test_allow_does_not_cover_a_larger_tangle(self) -> None:
        files = dict(CYCLE)
        files["src/lib.rs"] = "mod a;\nmod b;\nmod c;\npub use a::Thing;\n"
        files["src/c.rs"] = "pub fn k() { crate::b::make(); }\n"
        files["src/a.rs"] = CYCLE["src/a.rs"] + "pub fn z() { crate::c::k() }\n"
        write_crate(self.root, "demo", files)
        rc, out = run(self.root, "--allow", "demo:a~b")
        self.assertEqual(rc, 1, out)
        self.assertIn("tangled together: a, b, c", out)
        rc, out = run(self.root, "--allow", "demo:a~b~c")
        self.assertEqual(rc, 0, out)

    def test_bad_allow_is_an_error(self) -> None:
        write_crate(self.root, "demo", CYCLE)
        for spec in ("demo:a", "a~b", "demo:a~x::b", "demo:a~a"):
            rc, _ = run(self.root, "--allow", spec)
            self.assertEqual(rc, 2, spec)

    def test_no_crate_is_an_error(self) -> None:
        rc, _ = run(self.root)
        self.assertEqual(rc, 2)


class GraphTests(unittest.TestCase):
    def test_components_and_shortest_cycle(self) -> None:
        succ = {1: {2}, 2: {3, 1}, 3: {1}, 4: {4}, 5: {6}}
        comps = module_cycles.strongly_connected([1, 2, 3, 4, 5, 6], succ)
        self.assertEqual(comps, [[1, 2, 3]])
        self.assertEqual(module_cycles.shortest_cycle([1, 2, 3], succ), [1, 2, 1])

    def test_use_tree_expansion(self) -> None:
        toks = module_cycles.lex("crate::{a::{self, B as C}, d::*, e};")
        leaves = list(module_cycles._expand_use(toks, 0, len(toks) - 1))
        got = sorted((segs, alias, glob) for segs, alias, glob, _ in leaves)
        self.assertEqual(
            got,
            [
                (("crate", "a"), None, False),
                (("crate", "a", "B"), "C", False),
                (("crate", "d"), None, True),
                (("crate", "e"), None, False),
            ],
        )


if __name__ == "__main__":
    unittest.main()
