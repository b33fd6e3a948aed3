"""Readers of pasted tool output, one module per tool family.

Each reader takes a normalised :class:`~cudamatrix.detect.text.Paste` and the Environment being built,
claims the lines it read (so that the result can say which tool each block was read as, and which lines
were skipped), and returns whether it found its tool's output. Readers never raise on odd text, and every
pattern they apply to user text runs in linear time (anchored, bounded, or cut with str methods).
"""
