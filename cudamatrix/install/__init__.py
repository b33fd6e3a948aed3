"""Stage 3, install: a Solution becomes an inert Plan (:mod:`.plan`), which :mod:`.apply` executes with a
restore on failure; :mod:`.preload` maps the right library copies into a running kernel."""
