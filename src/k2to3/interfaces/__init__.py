"""The interfaces layer: the command line (cli.py, cli_options.py derived from core/options.py, cli_store.py,
summary.py, console.py), the Python API (api.py), the report writers (report.py) and the docs generators (docgen/).
Everything below is imported lazily from here: `k2to3 lint` and `fix` never import keras or a backend."""
