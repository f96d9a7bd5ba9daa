"""DuckDB with extensions loaded from their wheels: DuckDB cannot download
extensions here, so each comes pinned with DuckDB in scripts/requirements.txt
(`duckdb-extension-delta`, `-iceberg`, `-avro`) and is loaded from the file
its wheel carries, with autoloading off."""

import importlib
import os


def duckdb_connection(*extensions):
    """A connection with each of `extensions` ("delta", "avro", "iceberg") loaded."""
    import duckdb

    con = duckdb.connect(config={"autoinstall_known_extensions": False, "autoload_known_extensions": False})
    for name in extensions:
        wheel = importlib.import_module(f"duckdb_extension_{name}")
        root = os.path.join(os.path.dirname(wheel.__file__), "extensions")
        (path,) = [
            os.path.join(d, f) for d, _, files in os.walk(root) for f in files if f.endswith(".duckdb_extension")
        ]
        con.execute(f"LOAD '{path}'")
    return con
