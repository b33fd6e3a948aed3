from cudamatrix.cli import run

run()
