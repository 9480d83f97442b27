"""The one check of a name that reaches a page: a system's ``--name``, a profile's name, a hub id, a model folder.

A name heads a leaderboard row, a model page, a comparison and an explorer column, so it must read as itself
and as nothing else. :func:`check_name` refuses, in one line naming the parameter (or file) and the position:

- an empty name, or one longer than :data:`MAX_NAME` characters (not for a folder path);
- a control or format character (line breaks, zero-width characters, bidirectional controls such as U+202E),
  a surrogate, private-use or unassigned code point, and every *filler*: a character that shows as nothing or
  as a blank (Unicode's Default_Ignorable_Code_Point set, :data:`IGNORABLE`, e.g. U+3164 HANGUL FILLER, U+115F,
  U+1160, U+FFA0, variation selectors; U+2800 BRAILLE PATTERN BLANK; every space but the ASCII one, e.g.
  U+3000 IDEOGRAPHIC SPACE, U+00A0);
- ``{{`` or ``}}``, which the book's pages read as a placeholder (``{{fact:...}}``);
- a name that looks like one the atlas already has (``taken``: registry profiles, card baselines, existing
  result names) without being it: their confusable *skeletons* (:func:`skeleton`, after Unicode TR39) are
  equal, so ``m\u0430jority`` (Cyrillic а) and ``negspacy\u2011negex\u2011kit`` (non-breaking hyphens) read
  as ``majority`` and ``negspacy-negex-kit``.

  A name that differs from one of them only by case (``PROBE-SYS``, ``Probe-sys`` beside ``probe-sys``) is
  refused too, naming both: on a case-insensitive file system (macOS, Windows) their result folders are one
  folder, and on a page they read as the same system. Case is compared folded (:func:`folded`), also after the
  look-alike mapping (``MAJ0RITY`` beside ``majority``).

The skeleton is TR39's (decompose, map each character to its prototype, decompose again) with compatibility
decomposition (NFKD: fullwidth and mathematical letters become plain ones) and a small mapping, written out
here (:data:`LOOKALIKES`), of the characters of other scripts and of symbols that look like an ASCII letter,
digit, ``-``, ``.``, ``_`` or ``/`` (TR39 also takes ``I``, ``1`` and ``|`` for ``l`` and ``0`` for ``O``),
plus TR39's prototypes of more than one character (:data:`MULTI`: ``m`` is ``rn``, so ``rnedspacy-context``
reads as ``medspacy-context``; ``æ`` is ``ae``) and every hyphen-like character (:func:`is_dash`: Unicode's
dash punctuation, e.g. U+058A ARMENIAN HYPHEN, U+2010 HYPHEN, U+2014 EM DASH, U+FF0D FULLWIDTH HYPHEN-MINUS,
the minus signs, and the horizontal bars of :data:`BARS`) reads as ``-``. It is a subset of TR39's confusables
table, the part that can make a name look like an ASCII one (every name the atlas has is ASCII); look-alikes
among non-Latin scripts are left out.
"""
from __future__ import annotations

import unicodedata
from functools import lru_cache
from typing import Iterable, Mapping

#: a name shown on pages is at most this many characters (it heads a leaderboard row)
MAX_NAME = 100

#: Unicode's Default_Ignorable_Code_Point ranges (DerivedCoreProperties.txt): characters shown as nothing
IGNORABLE = ((0x00AD, 0x00AD), (0x034F, 0x034F), (0x061C, 0x061C), (0x115F, 0x1160), (0x17B4, 0x17B5),
             (0x180B, 0x180F), (0x200B, 0x200F), (0x202A, 0x202E), (0x2060, 0x206F), (0x3164, 0x3164),
             (0xFE00, 0xFE0F), (0xFEFF, 0xFEFF), (0xFFA0, 0xFFA0), (0xFFF0, 0xFFF8), (0x1BCA0, 0x1BCA3),
             (0x1D173, 0x1D17A), (0xE0000, 0xE0FFF))
#: characters that show as a blank without being ignorable or a space (every space but U+0020 is refused too)
BLANKS = frozenset("\u2800")  # BRAILLE PATTERN BLANK

#: prototype -> the characters that look like it (a vetted subset of TR39's confusables.txt: other scripts'
#: letters and symbols that read as an ASCII letter, digit or name punctuation)
LOOKALIKES = {
    "a": "\u0430\u0251\u03b1\u237a",
    "b": "\u042c\u13cf\u1472\u15af",
    "c": "\u0441\u03f2\u1d04\u2ca5",
    "d": "\u0501\u13e7\u146f\ua4d2",
    "e": "\u0435\u04bd\u212e\uab32",
    "f": "\u0584\u1e9d\ua799\uab35",
    "g": "\u0261\u0581\u018d\u1d83",
    "h": "\u04bb\u0570\u13c2",
    "i": "\u0456\u0131\u0269\u03b9\u13a5\ua647\u2373\u026a",
    "j": "\u0458\u03f3\u0237",
    "l": "I1|\u01c0\u0399\u0406\u04c0\u04cf\u05c0\u05d5\u05df\u0627\u0661\u06f1\u2223\u2c92\u2d4f\ua4f2\u16c1",
    "n": "\u0578\u057c",
    "o": "\u043e\u03bf\u0585\u03c3\u0b20\u101d\u2c9f\u1d0f\u0647\u06be\u06c1\u06d5\u0665\u06f5\u0966\u0a66\u0ae6"
         "\u0be6\u0c66\u0ce6\u0d66\u0e50\u0ed0\u1040",
    "p": "\u0440\u03c1\u03f1\u2ca3\u2374",
    "q": "\u051b\u0563\u0566",
    "r": "\u0433\u1d26\u2c85\uab47\uab48",
    "s": "\u0455\u01bd\ua731",
    "u": "\u057d\u028b\u03c5\u1d1c\ua79f\uab4e\uab52",
    "v": "\u03bd\u0475\u05d8\u1d20\u2228\u22c1",
    "w": "\u0461\u051d\u0561\u1d21\u026f",
    "x": "\u0445\u00d7\u1541\u157d\u166e\u292b\u292c\u2a2f",
    "y": "\u0443\u028f\u03b3\u04af\u10e7\u1eff\uab5a",
    "z": "\u1d22\uab93",
    "A": "\u0391\u0410\u13aa\u15c5\ua4ee",
    "B": "\u0392\u0412\u13f4\u15f7\ua4d0",
    "C": "\u03f9\u0421\u13df\ua4da",
    "D": "\u13a0\u15de\u15ea\ua4d3",
    "E": "\u0395\u0415\u13ac\ua4f0\u2d39",
    "F": "\u03dc\u15b4\ua4dd",
    "G": "\u050c\u13c0\u13f3\ua4d6",
    "H": "\u0397\u041d\u13bb\u157c\ua4e7\u2c8e",
    "J": "\u037f\u0408\u13ab\u148d\ua4d9",
    "K": "\u039a\u041a\u13e6\u16d5\ua4d7\u2c94",
    "L": "\u13de\u14aa\ua4e1\u2cd0",
    "M": "\u039c\u041c\u03fa\u13b7\u15f0\u16d6\ua4df\u2c98",
    "N": "\u039d\u2c9a\ua4e0",
    "O": "0\u039f\u041e\u0555\u2c9e\u07c0\u09e6\u0b66\u3007\ua4f3\u2d54",
    "P": "\u03a1\u0420\u13e2\u146d\ua4d1\u2ca2",
    "Q": "\u051a\u2d55",
    "R": "\u13a1\u13d2\u1587\ua4e3",
    "S": "\u0405\u054f\u13d5\u13da\ua4e2",
    "T": "\u03a4\u0422\u13a2\ua4d4\u22a4\u2ca6",
    "U": "\u054d\u1200\u144c\u222a\u22c3\ua4f4",
    "V": "\u0474\u13d9\u142f\ua4e6\u2d38",
    "W": "\u051c\u13b3\u13d4\ua4ea",
    "X": "\u03a7\u0425\u2573\ua4eb\u2cac\u166d",
    "Y": "\u03a5\u03d2\u04ae\u13a9\u13bd\ua4ec\u2ca8",
    "Z": "\u0396\u13c3\ua4dc",
    "2": "\u01a7\u03e8\u14bf\ua644",
    "3": "\u01b7\u021c\u0417\u04e0\ua76a\u2ccc",
    "4": "\u13ce",
    "5": "\u01bc",
    "6": "\u0431\u13ee\u2cd2",
    "8": "\u0222\u0223\u09ea\u0a6a\u0b03",
    "9": "\u09ed\u0a67\u0b68\u2cca\ua76e",
    "-": "\u2010\u2011\u2012\u2013\ufe58\u06d4\u2043\u02d7\u2212\u2796\u2cba",
    ".": "\u2024\u0660\u06f0\u0701\u0702\ua4f8\ua60e",
    "_": "\u07fa",
    "/": "\u2044\u2215\u2571\u27cb\u29f8\u3033\u31d3\u4e3f\u2cc6\u1735",
}
#: TR39's prototypes of more than one character (confusables.txt): character -> the characters it reads as
MULTI = {
    "m": "rn",
    "\u00e6": "ae", "\u00c6": "AE", "\u0153": "oe", "\u0152": "OE",
    "\u01c1": "ll", "\u042b": "bl", "\u042e": "lO",
    "\u02a3": "dz", "\u02a6": "ts", "\u02aa": "ls", "\u02ab": "lz",
}
#: horizontal bars that read as ``-`` without being dash punctuation (box drawing, the katakana prolonged sound
#: mark, the CJK and Hangul strokes)
BARS = frozenset("\u2500\u2501\u23af\u23e4\u30fc\uff70\u4e00\u2f00\u31d0\u3161\u1173\uffda")
#: the Dash characters that are math symbols, not punctuation (U+2212 MINUS SIGN and its super- and subscript)
_MINUS = frozenset("\u2212\u207b\u208b\u2053")
_PROTOTYPE = {ch: proto for proto, chars in LOOKALIKES.items() for ch in chars}
_PROTOTYPE.update(MULTI)


class NameRefused(ValueError):
    """A name that cannot reach a page as it is (one line naming the parameter, the character and where)."""


def is_ignorable(ch: str) -> bool:
    """True for a Default_Ignorable_Code_Point (shown as nothing)."""
    cp = ord(ch)
    return any(lo <= cp <= hi for lo, hi in IGNORABLE)


def is_dash(ch: str) -> bool:
    """True for a hyphen-like character other than ``-``: Unicode's dash punctuation (category Pd: U+058A
    ARMENIAN HYPHEN, U+2010-U+2015, U+2E3A, U+FE58, U+FF0D ...), the minus signs and :data:`BARS`."""
    return ch != "-" and (unicodedata.category(ch) == "Pd" or ch in _MINUS or ch in BARS)


def _prototypes(text: str) -> str:
    return "".join("-" if is_dash(ch) else _PROTOTYPE.get(ch, ch) for ch in text if not is_ignorable(ch))


@lru_cache(maxsize=4096)
def skeleton(name: str) -> str:
    """The confusable skeleton of ``name``: two names with the same skeleton look alike (TR39: mapped to their
    prototypes around compatibility decomposition, ignorable characters dropped)."""
    s = _prototypes(unicodedata.normalize("NFKD", _prototypes(name)))
    return unicodedata.normalize("NFKD", _prototypes(s))


@lru_cache(maxsize=4096)
def folded(name: str) -> str:
    """``name`` compared without case: its skeleton (:func:`skeleton`) of the case-folded name, folded again
    (``PROBE-SYS``, ``Probe-sys`` and ``probe-sys`` fold alike; so do ``MAJ0RITY`` and ``majority``)."""
    return skeleton(name.casefold()).casefold()


def hidden_character(name: str) -> tuple[int, str, str] | None:
    """``(position, character, kind)`` of the first character of ``name`` that does not show as itself: a
    control or format character (``control``) or a filler or blank other than the ASCII space (``filler``)."""
    for i, ch in enumerate(name, 1):
        cat = unicodedata.category(ch)
        if cat in ("Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"):
            return i, ch, "control"
        if is_ignorable(ch) or ch in BLANKS or (cat == "Zs" and ch != " "):
            return i, ch, "filler"
    return None


def _char(ch: str) -> str:
    return f"U+{ord(ch):04X}" + (f" ({unicodedata.name(ch)})" if unicodedata.name(ch, "") else "")


def lookalike(name: str, taken: Iterable[str]) -> str | None:
    """The first name of ``taken`` that ``name`` looks like without being it (equal skeletons, or equal once
    case is folded: :func:`folded`), else None."""
    mine, mine_folded = skeleton(name), folded(name)
    return next((t for t in taken if t != name and (skeleton(t) == mine or folded(t) == mine_folded)), None)


def _why(name: str, other: str) -> str:
    """What makes ``name`` read as ``other``, for a message: the first character (or characters) that read
    as something else, or that the two differ only by case; "" when nothing single can be named."""
    if name.casefold() == other.casefold():
        return (": the two differ only by case (on a case-insensitive file system, as on macOS and Windows, "
                "their result folders are one folder)")
    plain = [unicodedata.normalize("NFKD", c) for c in name]
    pos, ch = next(((i, c) for i, (c, d) in enumerate(zip(name, plain), 1)
                    if c.isascii() and skeleton(c) != d and c not in MULTI or not c.isascii() and skeleton(c) != d),
                   None) or next(((i, c) for i, (c, d) in enumerate(zip(name, plain), 1) if d != c), (None, None))
    if ch is not None:
        plain_ch = unicodedata.normalize("NFKD", ch)
        reads = plain_ch if plain_ch != ch and plain_ch.isascii() else skeleton(ch)
        return f": {_char(ch)} at position {pos} reads as {reads!r}"
    for src, seq in MULTI.items():  # 'rn' written where the other has 'm'
        at = name.find(seq)
        if at >= 0 and src in other:
            return f": {seq!r} at position {at + 1} reads as {src!r}"
    return ""


def check_name(name, what: str = "--name", *, taken: Mapping[str, str] | Iterable[str] = (), path: bool = False,
               kind: str = "a system name") -> str:
    """``name`` stripped of spaces at its ends and NFC-normalised, when it may reach a page (the rules of the
    module docstring); :class:`NameRefused` otherwise, one line starting with ``what`` (the parameter, or the
    file and entry). ``taken``: the atlas's names it must not look like (a mapping name -> what it is, e.g.
    "a registry profile", or just names); ``path``: the name is a model folder's path (no length limit, no
    look-alike check: pages show the path); ``kind``: what the name is, for the messages."""
    if not isinstance(name, str) or not name.strip():
        raise NameRefused(f"{what}: give a non-empty name (it names the result cell and the leaderboard row)")
    name = unicodedata.normalize("NFC", name.strip())
    if not path and len(name) > MAX_NAME:
        raise NameRefused(f"{what} is {len(name)} characters long; {kind} is at most {MAX_NAME} (it heads a "
                          f"leaderboard row)")
    hidden = hidden_character(name)
    if hidden is not None:
        pos, ch, how = hidden
        raise NameRefused(f"{what} holds the invisible or {how} character {_char(ch)} at position {pos}; "
                          f"{kind} is one line of visible text")
    if "{{" in name or "}}" in name:
        raise NameRefused(f"{what} {name!r} holds '{{{{' or '}}}}', which the book's pages read as a placeholder "
                          f"({{{{fact:...}}}}); choose a name without them")
    if not path:
        other = lookalike(name, taken)
        if other is not None:
            whose = taken.get(other) if isinstance(taken, Mapping) else None
            why = _why(name, other)
            raise NameRefused(f"{what} {name!r} looks like {other!r}{f', {whose}' if whose else ''}, without "
                              f"being it{why}; choose a name that reads differently")
    return name
