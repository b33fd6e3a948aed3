"""Fleets: gather every node's Environment (:mod:`.gather`, through Ray or Slurm), group identical nodes into
classes (:mod:`.classes`), and answer per class (:mod:`.perclass`: locks, the pre-job check, doctor).

This stage sits above solve and diagnose, which it uses; the library stages below never import it.
"""
