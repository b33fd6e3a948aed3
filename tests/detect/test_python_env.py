

def test_a_forked_probes_clock_becomes_its_times_and_leaves_the_answer():
    """The forked probe's ``clock`` ([its start, the end of its reading], time.monotonic() instants) against the
    fork's instant: its start-up and reading milliseconds; the key is taken out of the answer either way, and a
    clock that is not two numbers in order after the fork gives no times."""
    from cudamatrix.detect.python_env import _child_times

    raw = {"clock": [10.002, 10.0205], "dists": []}
    assert _child_times(raw, 10.0) == {"start": 2.0, "collect": 18.5} and raw == {"dists": []}
    for bad in ([9.0, 10.0], [10.3, 10.1], "x", [10.1], None):
        raw = {"clock": bad, "dists": []}
        assert _child_times(raw, 10.0) == {} and raw == {"dists": []}
    assert _child_times({"dists": []}, 10.0) == {}
