#!/usr/bin/env python3
"""Regenerates the >>nfc_tables block of amk_nfc.h and the NFC test vectors tests/data/tokenizer/nfc_cases.txt.

The tables (all sorted by code point; Hangul syllables are algorithmic and appear in none):
  props  disjoint ranges of code points with equal (canonical combining class, NFC_Quick_Check),
         for the code points where either is not the default (class 0, quick check Yes)
  decs   single-step canonical decompositions: {cp, d0, d1}, d1 = 0 for a singleton. The full
         decomposition is these applied recursively (amk_nfc.h does that at run time)
  comps  the primary composites: indices into decs, sorted by (d0, d1)

Primary composites are derived from the data, not from CompositionExclusions.txt: a code point c
with canonical decomposition d is one iff NFC(d) == c (this excludes the composition exclusions,
the singletons and the non-starter decompositions alike). NFC_Quick_Check is derived the same way:
No for a code point with a decomposition that is not a primary composite, Maybe for the second
code point of a primary composite's decomposition, the Hangul V and T jamo, and a primary
composite whose decomposition starts with a Maybe (new in Unicode 16: U+16121 = U+1611E U+1611E),
Yes otherwise.

Which Unicode version: the data of the running `unicodedata` module. Prefer the `unicodedata2`
package pinned to 16.0.0 (`pip install unicodedata2==16.0.0`): HF tokenizers' NFC normalizer (the
Rust unicode-normalization crate) uses Unicode 16. Without it the standard library's unicodedata is
used (Python 3.11: Unicode 14); Unicode's stability policy keeps the decompositions and classes of
assigned code points fixed, so tables of another version differ only on code points assigned after
the older of the two versions. The version used is recorded in the header and in the vectors.

The vectors: named cases (ASCII, text already in NFC, reordering, blocking, exclusions, singletons,
Hangul, long runs of marks, ...), every decomposable code point and its NFD, and seeded random
sequences from a pool rich in marks, starters that compose, and jamo. Each line is
`label;input;expected`, code points in hex separated by spaces, the expected NFC from Python.

Usage: python3 scripts/gen_nfc_tables.py [amk_nfc_h_path [cases_path]]   (defaults amk_nfc.h and
tests/data/tokenizer/nfc_cases.txt; the header is rewritten in place between the
">>nfc_tables begin" and ">>nfc_tables end" markers)
"""
import os
import random
import sys

try:
    import unicodedata2 as ud
    SOURCE = "unicodedata2 %s" % ud.unidata_version
except ImportError:
    import unicodedata as ud
    SOURCE = "Python %d.%d.%d unicodedata" % sys.version_info[:3]

SBASE, SCOUNT = 0xAC00, 11172
LBASE, LCOUNT, VBASE, VCOUNT, TBASE, TCOUNT = 0x1100, 19, 0x1161, 21, 0x11A7, 28
QC_YES, QC_MAYBE, QC_NO = 0, 1, 2
SEED = 20260513
N_RANDOM = 2400


def nfc(cps):
    return [ord(ch) for ch in ud.normalize("NFC", "".join(map(chr, cps)))]


def nfd(cps):
    return [ord(ch) for ch in ud.normalize("NFD", "".join(map(chr, cps)))]


def is_cp(c):
    return not (0xD800 <= c <= 0xDFFF)


def load():
    decs = {}
    for c in range(0x110000):
        if SBASE <= c < SBASE + SCOUNT:
            continue
        d = ud.decomposition(chr(c))
        if d and not d.startswith("<"):
            decs[c] = [int(x, 16) for x in d.split()]
    ccc = [ud.combining(chr(c)) for c in range(0x110000)]
    primary = sorted(c for c, d in decs.items() if nfc(d) == [c])
    qc = [QC_YES] * 0x110000
    for c in decs:
        qc[c] = QC_NO
    for c in primary:
        qc[c] = QC_YES
    for c in primary:
        assert qc[decs[c][1]] != QC_NO, hex(c)  # a second element is never itself excluded
        qc[decs[c][1]] = QC_MAYBE
    for c in list(range(VBASE, VBASE + VCOUNT)) + list(range(TBASE + 1, TBASE + TCOUNT)):
        qc[c] = QC_MAYBE
    # why: since Unicode 16 a composite may start with a Maybe (U+16121 is U+1611E U+1611E, and
    # U+1611E U+16121 is U+16121 U+1611E in NFC): such a composite can compose with what precedes
    # it, so it is Maybe too, and every code point of class 0 and Yes is a point where the text
    # before it and the text after it normalize independently (amk_nfc.h cuts text there).
    for c in primary:
        if qc[full_decomp(decs, c)[0]] == QC_MAYBE:
            qc[c] = QC_MAYBE
    return decs, ccc, primary, qc


def full_decomp(decs, c, depth=0):
    assert depth < 4
    if SBASE <= c < SBASE + SCOUNT:
        s = c - SBASE
        r = [LBASE + s // (VCOUNT * TCOUNT), VBASE + (s % (VCOUNT * TCOUNT)) // TCOUNT]
        return r + ([TBASE + s % TCOUNT] if s % TCOUNT else [])
    if c in decs:
        return sum((full_decomp(decs, x, depth + 1) for x in decs[c]), [])
    return [c]


def check(decs, ccc, primary, qc):
    """The facts amk_nfc.h relies on, checked against this version's data."""
    assert all(1 <= len(d) <= 2 for d in decs.values())
    assert all(len(decs[c]) == 2 and ccc[c] == 0 and ccc[decs[c][0]] == 0 for c in primary)
    assert max(len(full_decomp(decs, c)) for c in decs) <= 4  # AMK__NFC_MAX_DECOMP
    assert min(decs) >= 0xC0 and min(c for c in range(0x110000) if ccc[c] or qc[c]) >= 0x300
    assert all(0 < x <= 0x10FFFF for d in decs.values() for x in d)
    assert len(primary) < 65536
    for c in decs:  # the independence above: a Yes starter's decomposition starts with one
        if ccc[c] == 0 and qc[c] == QC_YES:
            f = full_decomp(decs, c)[0]
            assert ccc[f] == 0 and qc[f] == QC_YES, hex(c)
    # The derived quick check against NFC itself, on every code point alone.
    for c in range(0x110000):
        if is_cp(c) and qc[c] == QC_YES:
            assert nfc([c]) == [c], hex(c)
        if is_cp(c) and qc[c] == QC_NO:
            assert nfc([c]) != [c], hex(c)


def ranges_of(values):
    """[(lo, hi, value)] for the runs of equal non-default values."""
    out = []
    for c, v in enumerate(values):
        if v == (0, QC_YES):
            continue
        if out and out[-1][1] == c - 1 and out[-1][2] == v:
            out[-1] = (out[-1][0], c, v)
        else:
            out.append((c, c, v))
    return out


def c_rows(items):
    lines, row = [], ""
    for item in items:
        if len(row) + len(item) > 99:
            lines.append(row.rstrip())
            row = ""
        row += item
    lines.append(row.rstrip(","))
    return lines


def blocks_of(props, decs):
    """A bit per 256-code-point block: set when the block holds a code point of props or decs."""
    words = [0] * (0x110000 // 256 // 64)
    used = [c for lo, hi, _ in props for c in range(lo, hi + 1)] + list(decs)
    for c in used:
        words[c >> 14] |= 1 << ((c >> 8) & 63)
    while not words[-1]:
        words.pop()
    return words


def tables(decs, ccc, primary, qc):
    props = ranges_of(list(zip(ccc, qc)))
    dec_list = sorted(decs.items())
    index = {c: i for i, (c, _) in enumerate(dec_list)}
    comps = sorted(primary, key=lambda c: (decs[c][0], decs[c][1]))
    blocks = blocks_of(props, decs)
    n_no, n_maybe = qc.count(QC_NO), qc.count(QC_MAYBE)
    lines = [
        "/* The NFC tables - GENERATED by scripts/gen_nfc_tables.py; do not edit.",
        "   Source: %s (Unicode %s). HF tokenizers' NFC (the Rust unicode-normalization" % (SOURCE, ud.unidata_version),
        "   crate) uses Unicode 16; data of another version differs only on code points assigned after",
        "   the older of the two (Unicode's stability policy fixes the decompositions and classes of the",
        "   rest).",
        "   amk__nfc_props: %d sorted disjoint ranges of equal (combining class, NFC_Quick_Check: 0 Yes," % len(props),
        "   1 Maybe, 2 No) where either is not the default (0, Yes): %d No, %d Maybe code points; Maybe" % (n_no, n_maybe),
        "   includes the composites that start with a Maybe (U+16121 = U+1611E U+1611E), so a code",
        "   point of class 0 and Yes never interacts with the text before it.",
        "   amk__nfc_decs: the %d single-step canonical decompositions by code point (d1 = 0: a" % len(dec_list),
        "   singleton), Hangul syllables excepted. amk__nfc_comps: the %d primary composites (c with" % len(comps),
        "   NFC(decomposition of c) == c), as indices into amk__nfc_decs sorted by (d0, d1). */",
        "#define AMK__NFC_VERSION \"%s\"" % ud.unidata_version,
        "#define AMK__NFC_MAX_DECOMP 4 /* the longest full canonical decomposition */",
        "/* Below AMK__NFC_FIRST_PROP every code point has class 0 and quick check Yes; below",
        "   AMK__NFC_FIRST_DEC none has a decomposition. amk__nfc_blocks: bit c >> 8 is set when the",
        "   256 code points of c's block hold one in amk__nfc_props or amk__nfc_decs (%d of %d blocks;" % (sum(bin(w).count("1") for w in blocks), 0x110000 // 256),
        "   none from U+%X on). */" % (len(blocks) << 14),
        "#define AMK__NFC_FIRST_PROP 0x%X" % min(lo for lo, _, _ in props),
        "#define AMK__NFC_FIRST_DEC 0x%X" % min(decs),
        "typedef struct amk__nfc_prop { uint32_t lo, hi; unsigned char ccc, qc; } amk__nfc_prop;",
        "typedef struct amk__nfc_dec { uint32_t cp, d0, d1; } amk__nfc_dec;",
    ]
    lines += ["static const uint64_t amk__nfc_blocks[%d] = {" % len(blocks)]
    lines += c_rows(["0x%Xu," % w if w < 2**32 else "0x%Xull," % w for w in blocks])
    lines += ["};", "static const amk__nfc_prop amk__nfc_props[%d] = {" % len(props)]
    lines += c_rows(["{0x%X,0x%X,%d,%d}," % (lo, hi, v[0], v[1]) for lo, hi, v in props])
    lines += ["};", "static const amk__nfc_dec amk__nfc_decs[%d] = {" % len(dec_list)]
    lines += c_rows(["{0x%X,0x%X,%s}," % (c, d[0], "0x%X" % d[1] if len(d) > 1 else "0") for c, d in dec_list])
    lines += ["};", "static const uint16_t amk__nfc_comps[%d] = {" % len(comps)]
    lines += c_rows(["%d," % index[c] for c in comps])
    lines.append("};")
    return lines, (len(props), len(dec_list), len(comps))


# ---- the test vectors ---------------------------------------------------------------------------

def named_cases(rng):
    u = lambda s: [ord(ch) for ch in s]
    marks230 = [0x300, 0x301, 0x302, 0x303, 0x304, 0x306, 0x307, 0x308, 0x30A, 0x30B, 0x30C]
    mixed = [0x300, 0x301, 0x316, 0x323, 0x327, 0x328, 0x334, 0x338, 0x345, 0x35C, 0x35D, 0x5B0,
             0x5B9, 0x64B, 0x650, 0x93C, 0x94D, 0xE38, 0x302A, 0x3099, 0x1D165, 0x1D16D, 0x1E94A]
    cases = [
        ("empty", []),
        ("ascii", u("Hello, world! 123 {}[]~\t\n")),
        ("nfc_latin", u("caf\u00e9 d\u00e9j\u00e0 vu, na\u00efve \u00c5ngstr\u00f6m, \u0170\u0171")),
        ("nfc_greek_cyrillic", u("\u1f00\u03c1\u03c7\u03ae \u0439\u0451\u0419")),
        ("decomposed_e_acute", u("e\u0301")),
        ("decomposed_word", u("cafe\u0301 de\u0301ja\u0300")),
        ("reorder_a_301_316", u("a\u0301\u0316")),
        ("reorder_q_307_323", u("q\u0307\u0323")),
        ("reorder_3_marks", u("a\u0308\u0323\u0327")),
        ("reorder_nfc_input_then_mark", u("\u00e1\u0316")),
        ("blocked_same_class", u("a\u0305\u0301")),
        ("blocked_second_acute", u("a\u0301\u0301")),
        ("blocked_by_starter", u("a b\u030a")),
        ("blocked_by_cgj", u("a\u034f\u0301")),
        ("not_blocked_lower_class", u("a\u0316\u0301")),
        ("exclusion_0958", u("\u0958")),
        ("exclusion_0915_093c", u("\u0915\u093c")),
        ("exclusion_2adc", u("\u2adc")),
        ("exclusion_fb2a", u("\ufb2a")),
        ("exclusion_1d15e", u("\U0001d15e")),
        ("singleton_angstrom", u("\u212b")),
        ("singleton_ohm", u("\u2126")),
        ("singleton_kelvin", u("\u212a")),
        ("singleton_0340_0341_0343", u("a\u0340e\u0341o\u0343")),
        ("singleton_0374_037e_0387", u("\u0374\u037e\u0387")),
        ("singleton_1f71", u("\u1f71")),
        ("singleton_cjk_compat", u("\uf900\ufa10\U0002f800\U0002fa1d")),
        ("nonstarter_0344", u("\u0344")),
        ("nonstarter_0f73_0f75_0f81", u("\u0f73\u0f75\u0f81")),
        ("nonstarter_after_a", u("a\u0344")),
        ("hangul_lv", u("\u1100\u1161")),
        ("hangul_lvt", u("\u1100\u1161\u11a8")),
        ("hangul_lv_syllable_t", u("\uac00\u11a8")),
        ("hangul_precomposed", u("\ud55c\uad6d\uc5b4 \ud14c\uc2a4\ud2b8")),
        ("hangul_lvt_syllable_t", u("\uac01\u11a8")),
        ("hangul_lv_tbase", u("\uac00\u11a7")),
        ("hangul_l_not_v", u("\u1100\u1176")),
        ("hangul_lv_not_t", u("\uac00\u11c3")),
        ("hangul_filler", u("\u115f\u1160\u1100\u1160")),
        ("hangul_l_mark_v", u("\u1100\u0301\u1161")),
        ("hangul_lvtt", u("\u1112\u1175\u11c2\u11c2")),
        ("hangul_decomposed_text", nfd(u("\ud55c\uad6d\uc5b4 \ud14c\uc2a4\ud2b8"))),
        ("vietnamese_nfc", u("Ti\u1ebfng Vi\u1ec7t c\u00f3 d\u1ea5u")),
        ("vietnamese_nfd", nfd(u("Ti\u1ebfng Vi\u1ec7t c\u00f3 d\u1ea5u \u1edd \u1eeb \u1ef1"))),
        ("vietnamese_302_301", u("e\u0302\u0301")),
        ("vietnamese_301_302", u("e\u0301\u0302")),
        ("vietnamese_323_302", u("e\u0323\u0302")),
        ("vietnamese_302_323", u("e\u0302\u0323")),
        ("greek_stacked", u("\u03b1\u0313\u0300\u0345")),
        ("greek_stacked_reordered", u("\u03b1\u0345\u0300\u0313")),
        ("kannada_two_step", u("\u0cc6\u0cc2\u0cd5")),
        ("sinhala_two_step", u("\u0dd9\u0dcf\u0dca")),
        ("kaithi_supplementary", u("\U00011099\U000110ba")),
        ("gurung_khema_composite_after_maybe", u("\U0001611e\U00016121")),
        ("gurung_khema_three", u("\U0001611e\U0001611e\U0001611e\U0001611f")),
        ("gurung_khema_composite_then_second", u("\U0001611e\U00016124")),
        ("kirat_rai_composite_after_maybe", u("\U00016d67\U00016d68")),
        ("tulu_tigalari_composite_after_maybe", u("\U000113c2\U000113c5\U000113c2\U000113c7")),
        ("kana_dakuten", u("\u304b\u3099\u30ab\u3099\u30cf\u309a")),
        ("cjk", u("\u6f22\u5b57\u3068\u304b\u306a\u3001\u4e2d\u6587\u3002")),
        ("emoji", u("\U0001f44d\U0001f3fd \U0001f468\u200d\U0001f469\u200d\U0001f467 \u2764\ufe0f")),
        ("start_nonstarter", u("\u0301a")),
        ("start_nonstarters_reorder", u("\u0301\u0316a\u0301")),
        ("only_nonstarters", u("\u0308\u0301\u0323")),
        ("long_acute_300", u("a") + [0x301] * 300),
        ("long_alternating_300", u("a") + [0x301, 0x316] * 150),
        ("long_random_marks_300", u("e") + [rng.choice(mixed) for _ in range(300)]),
        ("long_nonstarters_300", [rng.choice(mixed) for _ in range(300)]),
        ("long_same_class_300", u("o") + [rng.choice(marks230) for _ in range(300)] + u("x")),
        ("long_hangul_v_300", u("\u1100") + [0x1161] * 300),
    ]
    return cases


def pool(decs, ccc, primary, qc):
    firsts = sorted(set(decs[c][0] for c in primary))
    seconds = sorted(set(decs[c][1] for c in primary))
    marks = [c for c in range(0x110000) if ccc[c]]
    composites = sorted(decs)
    jamo = list(range(LBASE, LBASE + LCOUNT)) + list(range(VBASE, VBASE + VCOUNT)) + \
        list(range(TBASE, TBASE + TCOUNT)) + [0x115F, 0x1160, 0x1176, 0x11C3]
    syllables = [SBASE + i * TCOUNT for i in range(0, LCOUNT * VCOUNT, 7)] + [SBASE + 1, SBASE + 27, 0xD7A3]
    plain = [ord(ch) for ch in "ae oAE,1"] + [0x4E00, 0x1F600, 0x3042, 0x05D0, 0x0627]
    # (weight, group)
    return [(4, firsts), (4, seconds), (5, marks), (2, composites), (4, jamo), (1, syllables), (1, plain)]


def random_cases(rng, groups):
    total = sum(w for w, _ in groups)
    cases = []
    for i in range(N_RANDOM):
        n = rng.randint(1, 8) if i % 20 else rng.randint(20, 60)  # some runs past the sort's cutoff
        seq = []
        for _ in range(n):
            r = rng.randrange(total)
            for w, g in groups:
                if r < w:
                    seq.append(rng.choice(g))
                    break
                r -= w
        cases.append(("random_%d" % i, seq))
    return cases


def hexs(cps):
    return " ".join("%X" % c for c in cps)


def write_cases(path, decs, ccc, primary, qc):
    rng = random.Random(SEED)
    cases = named_cases(rng)
    for c in sorted(decs):
        cases.append(("dec_%X" % c, [c]))
        cases.append(("nfd_%X" % c, nfd([c])))
    cases += random_cases(rng, pool(decs, ccc, primary, qc))
    with open(path, "w") as f:
        f.write("# NFC test vectors - GENERATED by `python3 scripts/gen_nfc_tables.py` (with unicodedata2==16.0.0\n")
        f.write("# installed); do not edit. Source: %s (Unicode %s), seed %d.\n" % (SOURCE, ud.unidata_version, SEED))
        f.write("# label;input;expected NFC - code points in hex, separated by spaces (none: empty).\n")
        for label, cps in cases:
            assert all(is_cp(c) for c in cps)
            f.write("%s;%s;%s\n" % (label, hexs(cps), hexs(nfc(cps))))
    return len(cases)


def main():
    here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(here, "amk_nfc.h")
    cases_path = sys.argv[2] if len(sys.argv) > 2 else os.path.join(here, "tests", "data", "tokenizer", "nfc_cases.txt")
    decs, ccc, primary, qc = load()
    check(decs, ccc, primary, qc)
    lines, counts = tables(decs, ccc, primary, qc)
    from gen_unicode_tables import replace_block  # scripts/, beside this one
    replace_block(out, "nfc_tables", lines)
    n_cases = write_cases(cases_path, decs, ccc, primary, qc)
    print("wrote %s: %d prop ranges, %d decompositions, %d composites (%s); %s: %d cases"
          % (out, counts[0], counts[1], counts[2], SOURCE, cases_path, n_cases))


if __name__ == "__main__":
    main()
