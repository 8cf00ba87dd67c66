"""Writes a copy of a capture whose GPU planes name their kernels' TensorFlow op in `tf_op`.

    python scripts/capture/level0_as_tf_op.py SRC.xplane.pb DST.xplane.pb

TensorFlow 2.2-2.4 recorded the op of each kernel in the `level 0` stat; XProf 2.24 reads only
`tf_op`, so its framework-op statistics list no device op for such captures. This renames the
`level 0` stat metadata of every `/device:GPU:*` plane to `tf_op` at the byte level (every other
byte is kept; only the enclosing lengths change), so that XProf attributes the kernels and its
output can be compared with xlens's device ops. Used to make
`testdata/field/tf_v100_multiworker/xprof/tool_framework_op_stats__level0_as_tf_op.json`
(`roofline/tests/xprof_framework_ops.rs` applies the same rename in memory).
"""
from __future__ import annotations

import sys


def read_varint(b: bytes, i: int) -> tuple[int, int]:
    r = s = 0
    while True:
        c = b[i]
        i += 1
        r |= (c & 0x7F) << s
        s += 7
        if c < 0x80:
            return r, i


def fields(b: bytes):
    i = 0
    while i < len(b):
        key, i = read_varint(b, i)
        f, w = key >> 3, key & 7
        if w == 0:
            v, i = read_varint(b, i)
        elif w == 1:
            v, i = b[i : i + 8], i + 8
        elif w == 5:
            v, i = b[i : i + 4], i + 4
        elif w == 2:
            n, i = read_varint(b, i)
            v, i = b[i : i + n], i + n
        else:
            raise ValueError(f"wire type {w}")
        yield f, w, v


def varint(v: int) -> bytes:
    out = bytearray()
    while True:
        b, v = v & 0x7F, v >> 7
        out.append(b | 0x80 if v else b)
        if not v:
            return bytes(out)


def field(f: int, w: int, v) -> bytes:
    key = varint((f << 3) | w)
    if w == 0:
        return key + varint(v)
    if w == 2:
        return key + varint(len(v)) + v
    return key + v


def plane(b: bytes) -> tuple[bytes, int]:
    name = next((v.decode() for f, _, v in fields(b) if f == 2), "")
    if not name.startswith("/device:GPU:"):
        return b, 0
    out, renamed = bytearray(), 0
    for f, w, v in fields(b):
        if f == 5:  # stat_metadata: map entry {1: id, 2: XStatMetadata {1: id, 2: name}}
            entry = bytearray()
            for f2, w2, v2 in fields(v):
                if f2 == 2:
                    md = bytearray()
                    for f3, w3, v3 in fields(v2):
                        if f3 == 2 and v3 == b"level 0":
                            v3, renamed = b"tf_op", renamed + 1
                        md += field(f3, w3, v3)
                    v2 = bytes(md)
                entry += field(f2, w2, v2)
            v = bytes(entry)
        out += field(f, w, v)
    return bytes(out), renamed


def main() -> None:
    src, dst = sys.argv[1], sys.argv[2]
    data = open(src, "rb").read()
    out, renamed = bytearray(), 0
    for f, w, v in fields(data):
        if f == 1:  # planes
            v, n = plane(v)
            renamed += n
        out += field(f, w, v)
    with open(dst, "wb") as fh:
        fh.write(bytes(out))
    print(f"renamed {renamed} stat(s)")


if __name__ == "__main__":
    main()
