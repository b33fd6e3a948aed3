"""Tests of cudamatrix.detect (a package, so that test files named after modules of two stages, test_resources.py, do not clash)."""
