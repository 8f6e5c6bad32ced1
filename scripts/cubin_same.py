#!/usr/bin/env python3
"""scripts/cubin_same.py A.cubin B.cubin - are two device images the same code?

nvcc names internal-linkage symbols _INTERNAL_<hash>_ with a hash of the source text, so any edit
(a comment, code under an #if that is off) changes those bytes; and the .note.nv.tkinfo section
records the nvcc command line (the output path, -Xptxas options), which is not code. This
compares the images section by section, with B's hash replaced by A's, skipping that note and the
sections that occupy no file bytes (NOBITS: .nv.shared.*, whose header offsets move with the
note): "same" means a change left the device code byte for byte as it was (the rule for work
merged behind a knob that is off). Exit 0 when same, 1 when not, 2 on bad use.
"""
import re
import struct
import sys

SKIP = {b".note.nv.tkinfo"}
SHT_NOBITS = 8


def sections(elf):
    """[(name, type, flags, content)] of an ELF64 little-endian image."""
    shoff = struct.unpack_from("<Q", elf, 0x28)[0]
    entsize, count, strndx = struct.unpack_from("<HHH", elf, 0x3A)
    heads = [struct.unpack_from("<IIQQQQIIQQ", elf, shoff + i * entsize) for i in range(count)]
    names = heads[strndx][4]
    out = []
    for name_off, typ, flags, _addr, off, size, _link, _info, _align, _ent in heads:
        name = elf[names + name_off:elf.index(b"\0", names + name_off)]
        out.append((name, typ, flags, b"" if typ == SHT_NOBITS else elf[off:off + size], size))
    return out


def main():
    if len(sys.argv) != 3:
        print(__doc__.strip().splitlines()[0], file=sys.stderr)
        return 2
    a, b = (open(p, "rb").read() for p in sys.argv[1:])
    ha, hb = (re.search(rb"_INTERNAL_([0-9a-f]{8})_", x) for x in (a, b))
    if ha and hb:
        b = b.replace(hb.group(1), ha.group(1))
    sa, sb = ([s for s in sections(x) if s[0] not in SKIP] for x in (a, b))
    diff = [x[0].decode() for x, y in zip(sa, sb) if x != y]
    if len(sa) != len(sb):
        diff.append("(%d and %d sections)" % (len(sa), len(sb)))
    print("same" if not diff else "different: " + ", ".join(diff[:6]) + (" ..." if len(diff) > 6 else ""))
    return 0 if not diff else 1


if __name__ == "__main__":
    sys.exit(main())
