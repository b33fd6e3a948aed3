"""Undo what pasting does to a tool's output: quote markers, code fences, Windows line endings, NULs.

Pure functions; every report parser and the live probes' parsers read text through :func:`clean`.
"""
from __future__ import annotations

import re
from bisect import bisect_right
from collections import deque
from itertools import accumulate, chain, compress, count
from operator import add
from typing import Literal

from cudamatrix.safe.text import lazy

MAX_BYTES = 4 * 1024 * 1024  # a pasted report is never this long; read at most this much of a file

# A shell prompt before a command: "(venv) user@host:~/dir$ ", "[user@host dir]# ", "$ ", "PS C:\\x> ",
# "C:\\Users\\me>", ">>> ", "... ", "In [3]: ", "!" (a notebook cell). Every repetition is bounded and the
# pattern is anchored at the line's start, so a hostile line costs a constant amount of work.
_PROMPT = lazy(
    r"(?:\([^()\s]{1,80}\) {0,2})?"  # a conda or venv name
    r"(?:(?:[\w.-]{1,64}@[\w.-]{1,64}(?::[^\s$#]{0,200})? ?|\[[^\]\n]{1,200}\] ?|PS [^>\n]{1,200}|"
    r"[A-Za-z]:\\[^>\n]{0,200})[$#%>] ?|[$%] |# (?=(?:nvidia-smi|nvcc|python|pip|conda|ldconfig|cat|jax|uv))|"
    r">>> ?|\.\.\. |In \[\d{1,6}\]: |!(?=[a-z]))")
_HTML_TAG = lazy(r"</?(?:details|summary|pre|code|br|p|div|sub|sup|b|i)\b[^<>\n]{0,200}>")
# a line that may hold a quote marker, a fence, an HTML tag or a prompt (anchored at the line's start)
_WRAPPED = lazy(r"[ \t]*(?:[>`~<$%#!(\[]|\.\.\. |In \[|PS |[A-Za-z]:\\|[\w.-]{1,64}@)")
_ESCAPES = ("&gt;", "&lt;", "&amp;", "&quot;", "&#")
_AFTER_NEWLINE: dict[re.Pattern, re.Pattern] = {}  # Paste.where's patterns, each behind a newline


def decode(data: bytes) -> tuple[str, bool]:
    """Bytes to text. Returns (text, looks_binary): binary when NULs or undecodable bytes abound."""
    sample = data[:65536]
    bad = sample.count(b"\x00")
    text = data.decode("utf-8", errors="replace")
    bad += text[:65536].count("\ufffd")
    return text, bool(sample) and bad > max(8, len(sample) // 20)


# markdown quote markers ("> ", ">"), each after optional blanks; a Python prompt (">>> ", a line ending in ">>>")
# is no marker. Every repetition consumes a ">", and nothing follows the group to fail: matched in one pass, no
# backtracking, whatever the line holds
_QUOTES = lazy(r"(?:[ \t]*(?!>>> |>>>$)> ?)*")


def unquote(line: str) -> str:
    """Remove markdown quote markers ("> ", "> > ") from the start of a line; a Python prompt (">>> ") stays.

    The markers are found with str methods (C speed, a line of a million of them included); only a run that holds a
    ">>>" goes through :data:`_QUOTES`, which tells a prompt from markers."""
    rest = line.lstrip(" \t>")
    prefix = line[:len(line) - len(rest)]
    last = prefix.rfind(">")
    if last < 0:
        return line
    if ">>>" in prefix:
        found = _QUOTES.match(line)  # matches at every position (its group may repeat zero times)
        cut = found.end() if found else 0
    else:
        cut = last + 1 + (line[last + 1:last + 2] == " ")
    return line[cut:] if cut else line


def split_prompt(line: str) -> tuple[bool, str]:
    """(True, the command) when the line is a shell, Python or notebook prompt; else (False, the line)."""
    body = line.lstrip(" \t")
    m = _PROMPT.match(body)
    if m is None or m.end() == len(body):
        return False, line
    return True, body[m.end():]


def _unwrap(line: str) -> tuple[str, str | None, bool]:
    """A line without its wrapping, the prompt taken off it (None: no command) and whether it is wrapping only
    (neutral). A fence or an HTML tag line becomes blank (neutral), inline code around the whole line is taken off
    ("`text`", "```text```"), a prompt is taken off its command (neutral too). A fence followed by three words or
    more on its line is output typed right after it (an info string is one word)."""
    body = line.strip()
    code = body.strip("`")
    if body[:1] == "`" and body[-1:] == "`" and code.strip() and "`" not in code:
        return code.strip(), None, False  # one line of inline code: the code
    if body.startswith(("```", "~~~")) and len(body.lstrip("`~").split()) >= 3:
        return body.lstrip("`~"), None, False  # output typed on the fence's line ("```\tlibcudart.so.11.0 -> ...")
    if body.startswith(("```", "~~~")) or (body.startswith("<") and _HTML_TAG.sub("", body).strip() == ""):
        return "", None, True
    is_cmd, rest = split_prompt(line)
    if is_cmd:
        return rest, line[:len(line) - len(rest)], True
    return line, None, False


class Paste:
    """A pasted text, normalised line by line (the line count is kept, so line numbers still point into the file).

    Undone: Windows and old-Mac line endings, NULs, HTML escapes (``&gt;`` in a paste copied from a web page),
    markdown quote markers, code fences and the HTML of a collapsed section. Shell and Python prompts are taken
    off the command they precede and the line is marked as a command. Indentation is kept: readers compare
    stripped lines, and ``nvidia-smi -q`` reads its nesting from relative indentation.
    """

    def __init__(self, raw: str) -> None:
        text = raw
        if "\r" in text:  # each test is one fast search; a copy of the text only when there is something to undo
            text = text.replace("\r\n", "\n").replace("\r", "\n")
        if "\x00" in text:
            text = text.replace("\x00", "")
        if "&" in text and any(e in text for e in _ESCAPES):
            import html

            text = html.unescape(text)
        self.lines: list[str] = text.split("\n")
        self.commands: set[int] = set()
        self.prompts: dict[int, str] = {}  # a command's line -> the prompt taken off it ("[root@24c96d985c30 /]# ")
        self.neutral: set[int] = set()  # fences, HTML tags, prompts: wrapping, not tool output
        self.kind: list[str | None] = [None] * len(self.lines)
        self._text: str | None = text
        self._starts: list[int] | None = None
        self._repeats: _Distinct | Literal[False] | None = None  # :meth:`_distinct`; False: it would not pay
        # only the lines that carry a quote marker, a fence, a tag or a prompt (_WRAPPED) are looked at one by one,
        # each distinct line once (a long log repeats its lines)
        lines, changed = self.lines, False
        undone: dict[str, tuple[str, str | None, bool]] = {}
        for i in compress(range(len(lines)), map(_WRAPPED.match, lines)):
            line = lines[i]
            done = undone.get(line)
            if done is None:
                done = undone[line] = _unwrap(unquote(line.rstrip()))
            bare, prompt, neutral = done
            if neutral:
                self.neutral.add(i)
            if prompt is not None:
                self.commands.add(i)
                self.prompts[i] = prompt
            if bare != line:
                lines[i] = bare
                changed = True
        if changed:
            self._text, self._starts = None, None

    @property
    def text(self) -> str:
        """The normalised lines joined by newlines."""
        if self._text is None:
            self._text = "\n".join(self.lines)
        return self._text

    def where(self, pattern: re.Pattern) -> list[int]:
        """Indices of the lines that ``pattern`` matches at their start (``pattern.match``; keep it bounded).

        The pattern must never match a newline: it is looked for in the text after each newline (one search in C
        over the whole paste, a search that skips ahead to the next newline at once), and a match's line is the
        count of newlines before it, counted from the previous match. A paste that repeats its lines is searched
        once per distinct line (:meth:`_distinct`)."""
        found = _AFTER_NEWLINE.get(pattern)
        if found is None:
            found = _AFTER_NEWLINE[pattern] = re.compile("\n(?:" + pattern.pattern + ")", pattern.flags)
        view = self._view()
        lines, text = view.lines, view.text
        out = [0] if lines and pattern.match(lines[0]) else []
        newlines = text.count
        line = last = 0
        for m in found.finditer(text):
            at = m.start() + 1
            line += newlines("\n", last, at)
            last = at
            out.append(line)
        return view.spread(out)

    def having(self, *needles: str) -> list[int]:
        """Indices of the lines that contain one of ``needles`` (plain substrings: the fastest filter there is).

        A needle is looked for occurrence by occurrence (each one's line by bisection), which on a long paste
        costs one pass over the text; one that turns out common (more than a line in eight) goes over the
        lines instead. A one-character needle is counted first: it is usually common. A paste that repeats its
        lines is searched once per distinct line (:meth:`_distinct`)."""
        view = self._view()
        return view.spread(view.having(needles))

    def having_lower(self, needle: str) -> list[int]:
        """Indices of the lines whose lower-cased text holds ``needle`` (lower case), in order: found in the
        lower-cased text, each occurrence's line by bisection (when lower-casing kept every character's place;
        else line by line). A paste that repeats its lines is searched once per distinct line."""
        view = self._view()
        return view.spread(view.having_lower(needle))

    def _view(self) -> _Lines:
        """The lines a search reads: the distinct ones where that pays (:meth:`_distinct`), else the paste's own."""
        distinct = self._distinct()
        if distinct:
            return distinct
        if self._starts is None:
            self._starts = _starts_of(self.lines)
        return _Lines(self.lines, self.text, self._starts)

    def _distinct(self) -> _Distinct | None:
        """The paste's distinct lines, when there are at most half as many as lines (a long log repeats its
        warnings, a watched nvidia-smi its table): searching those and spreading each hit to every line that
        repeats it costs a fraction of searching the whole text. None otherwise (worked out once)."""
        if self._repeats is None:
            lines = self.lines
            firsts = dict.fromkeys(lines)
            self._repeats = _Distinct(lines, firsts) if len(lines) >= 64 and 2 * len(firsts) <= len(lines) else False
        return self._repeats or None

    def line_of(self, pos: int) -> int:
        """The index of the line holding character ``pos`` of :attr:`text`."""
        if self._starts is None:
            self._starts = _starts_of(self.lines)
        return bisect_right(self._starts, pos) - 1

    def free(self, i: int) -> bool:
        """Line ``i`` is not yet read as some tool's output."""
        return self.kind[i] is None

    def claim(self, i: int, kind: str) -> None:
        """Mark line ``i`` as read as ``kind`` (the first reader to claim a line keeps it)."""
        if self.kind[i] is None and i not in self.commands:
            self.kind[i] = kind

    def claim_all(self, indices: list[int], kind: str) -> None:
        """:meth:`claim` for each of ``indices`` (one call for the thousands of lines a long paste has)."""
        kinds, commands = self.kind, self.commands
        for i in indices:
            if kinds[i] is None and i not in commands:
                kinds[i] = kind

    def claim_range(self, start: int, end: int, kind: str) -> None:
        """Claim every non-blank line of ``start..end`` (inclusive)."""
        for i in range(start, end + 1):
            if self.lines[i].strip():
                self.claim(i, kind)

    def blocks(self) -> list[tuple[str, int, int]]:
        """(kind, first line, last line), 1-based, of each run of lines read as one kind (blank lines join runs)."""
        out: list[list] = []
        kinds, lines, neutral = self.kind, self.lines, self.neutral
        for i in compress(range(len(kinds)), kinds):  # the claimed lines only
            kind = kinds[i]
            if out and out[-1][0] == kind and (i == out[-1][2] or all(not lines[j].strip() or j in neutral
                                                                      for j in range(out[-1][2], i))):
                out[-1][2] = i + 1
            else:
                out.append([kind, i + 1, i + 1])
        return [tuple(b) for b in out]

    def skipped(self) -> list[int]:
        """1-based numbers of the non-blank lines no reader recognised."""
        kinds, neutral = self.kind, self.neutral
        return [i + 1 for i in compress(range(len(self.lines)), map(str.strip, self.lines))
                if kinds[i] is None and i not in neutral]


def _starts_of(lines: list[str]) -> list[int]:
    """Where each of ``lines`` starts in the lines joined by newlines: after the lengths of the lines before it and
    their newlines."""
    return [0, *map(add, accumulate(map(len, lines)), count(1))][:len(lines)]


class _Lines:
    """Lines, their text (joined by newlines) and each line's start in it: what :meth:`Paste.having` searches."""

    def __init__(self, lines: list[str], text: str, starts: list[int]) -> None:
        self.lines, self.text, self.starts = lines, text, starts

    def spread(self, found: list[int]) -> list[int]:
        """The paste's lines that ``found`` (indices of these lines) stands for: the same ones."""
        return found

    def having(self, needles: tuple[str, ...]) -> list[int]:
        """The lines holding one of ``needles``, in order, each once (:meth:`Paste.having`)."""
        runs: list[list[int]] = []  # per needle, its lines in order
        text = self.text
        limit = len(self.lines) // 8
        for needle in needles:
            searchable = needle and "\n" not in needle
            if searchable and text.find(needle) < 0:
                continue
            common = not searchable or len(needle) == 1 and text.count(needle) > limit
            run = None if common else self._holding(needle, limit)
            runs.append(run if run is not None else [i for i, line in enumerate(self.lines) if needle in line])
        if len(runs) == 1:
            return runs[0]  # one needle found: its lines are in order already, each once
        return sorted(set().union(*runs))

    def having_lower(self, needle: str) -> list[int]:
        """The lines whose lower-cased text holds ``needle``, in order, each once (:meth:`Paste.having_lower`)."""
        low = self.text.lower()
        if needle not in low:
            return []
        if len(low) != len(self.text):  # a character that lower-cases to two ("\u0130"): offsets moved
            return [i for i, line in enumerate(self.lines) if needle in line.lower()]
        out: list[int] = []
        at = low.find(needle)
        while at >= 0:
            out.append(bisect_right(self.starts, at) - 1)
            at = low.find(needle, at + len(needle))
        return list(dict.fromkeys(out))

    def _holding(self, needle: str, limit: int) -> list[int] | None:
        """The lines holding ``needle``, found occurrence by occurrence (each one's line by bisection of the
        lines' start offsets); None past ``limit`` lines (a common needle)."""
        text, starts = self.text, self.starts
        find, end = text.find, len(text)
        run: list[int] = []
        pos = find(needle)
        while pos >= 0:
            if len(run) >= limit:
                return None
            i = bisect_right(starts, pos) - 1
            run.append(i)
            pos = find(needle, starts[i + 1] if i + 1 < len(starts) else end)
        return run


class _Distinct(_Lines):
    """A paste's distinct lines (in the order each first appears) and, for each, every line of the paste that
    repeats it."""

    def __init__(self, lines: list[str], firsts: dict[str, None]) -> None:
        distinct = list(firsts)
        super().__init__(distinct, "\n".join(distinct), _starts_of(distinct))
        copies: dict[str, list[int]] = {line: [] for line in distinct}
        # each line's index appended to its text's copies, the loop run in C (deque of no length: run to the end)
        deque(map(list.append, map(copies.__getitem__, lines), range(len(lines))), maxlen=0)
        self.copies: list[list[int]] = list(copies.values())  # in the order of ``distinct``

    def spread(self, found: list[int]) -> list[int]:
        """The paste's lines that repeat one of the distinct lines ``found``, in order."""
        copies = self.copies
        if len(found) == 1:
            return list(copies[found[0]])
        return sorted(chain.from_iterable(map(copies.__getitem__, found)))


def read_anchored(paste: Paste, env, readers) -> bool:
    """Run each ``(anchors, reader)`` of ``readers`` whose anchors (a few substrings every text it reads holds)
    occur in the paste: one search of the text each, where the readers' own words would cost several. True when
    one of them read something."""
    text = paste.text
    found = False
    for anchors, reader in readers:
        if any(a in text for a in anchors):
            found |= reader(paste, env)
    return found


def ranges(numbers: list[int], limit: int = 12) -> str:
    """[1, 2, 3, 7] -> "1-3, 7" (at most ``limit`` ranges, then "and N more")."""
    return span_ranges([(n, n) for n in numbers], limit)


def span_ranges(spans: list[tuple[int, int]], limit: int = 12) -> str:
    """[(1, 2), (3, 3), (7, 9)] -> "1-3, 7-9": spans in order, those that touch joined (as :func:`ranges`)."""
    joined: list[list[int]] = []
    for a, b in spans:
        if joined and a == joined[-1][1] + 1:
            joined[-1][1] = b
        else:
            joined.append([a, b])
    words = [f"{a}-{b}" if b > a else str(a) for a, b in joined[:limit]]
    if len(joined) > limit:
        words.append(f"and {len(joined) - limit} more")
    return ", ".join(words)


def clean(text: str) -> str:
    """Normalise a paste (see :class:`Paste`) and return it as one text; prompts are taken off commands."""
    return Paste(text).text


def version_from_int(value: int | None, *, patch: bool = False) -> str | None:
    """CUDA's integer encoding (1000*major + 10*minor [+ patch]) to "12.4"; None for 0 or None."""
    if not value or value < 0:
        return None
    major, rest = divmod(int(value), 1000)
    minor, p = divmod(rest, 10)
    return f"{major}.{minor}.{p}" if patch else f"{major}.{minor}"


def cudnn_version(value: int | None) -> str | None:
    """cudnnGetVersion()'s integer to "9.1.0".

    cuDNN < 9 encodes major*1000 + minor*100 + patch; cuDNN 9 switched to major*10000 + minor*100 + patch
    (cuDNN 9.0.0 release notes, "CUDNN_VERSION" change).
    """
    if not value or value < 0:
        return None
    if value >= 90000:
        major, rest = divmod(value, 10000)
    else:
        major, rest = divmod(value, 1000)
    minor, p = divmod(rest, 100)
    return f"{major}.{minor}.{p}"
