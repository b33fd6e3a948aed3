"""The tests' helpers (fakes, loopback indexes, real wheels, snapshots ...), imported as ``support.<name>``
(conftest.py puts tests/ on sys.path)."""
