#!/usr/bin/env python3
"""scripts/cubin_same.py A.cubin B.cubin - are two device images the same code?

nvcc names internal-linkage symbols _INTERNAL_<hash>_ with a hash of the source text, so any edit
(a comment, code under an #if that is off) changes those bytes. This compares the images with B's
hash replaced by A's: "same" means a change left the device code byte for byte as it was (the
rule for work merged behind a knob that is off). Exit 0 when same, 1 when not, 2 on bad use.
"""
import re
import sys


def main():
    if len(sys.argv) != 3:
        print(__doc__.strip().splitlines()[0], file=sys.stderr)
        return 2
    a, b = (open(p, "rb").read() for p in sys.argv[1:])
    ha, hb = (re.search(rb"_INTERNAL_([0-9a-f]{8})_", x) for x in (a, b))
    if ha and hb:
        b = b.replace(hb.group(1), ha.group(1))
    same = a == b
    print("same" if same else "different (%d and %d bytes)" % (len(a), len(b)))
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
