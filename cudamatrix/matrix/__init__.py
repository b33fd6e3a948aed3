"""Stage 0, the Matrix: the compatibility data in ``data/``, read into records (:mod:`.data`), loaded with the
user's overlay (:mod:`.load`) and queried (:mod:`.query`).

Nothing is imported here: each caller imports the module it needs (``from cudamatrix.matrix.load import
load_matrix``), so that reading one of them (the sources' records for ``--version``'s render) does not load the
rest (the overlay and the queries: 5 ms of ``--version``, python -X importtime)."""
