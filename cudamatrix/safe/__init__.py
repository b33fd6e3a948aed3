"""Base-level safety helpers used by every stage: bounded reads and atomic, exclusive writes
(:mod:`.files`), and one quoting function per shell (:mod:`.shells`)."""
