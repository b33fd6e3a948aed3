"""The ld.so model: which file glibc's loader maps for each library a framework asks for, from ELF
headers (:mod:`.elf`, cached: :mod:`.elfcache`), the ld.so cache (:mod:`.ldcache`), the search
itself (:mod:`.linkmap`), how each framework loads (:mod:`.recipes`), what a library opens itself
(:mod:`.openers`) and the predictions per framework (:mod:`.libpaths`). Reads files, runs no
library: detect, diagnose, solve, verify and fix read it."""
