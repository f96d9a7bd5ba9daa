"""Reads weir's Iceberg tables as other engines do: pyiceberg's SqlCatalog
pointed at weir's catalog database (SQLite file or PostgreSQL URL; a
bucket's endpoint and keys from AWS_* in the environment), or its
RestCatalog pointed at `weir serve`, Polars' scan_iceberg over the table
pyiceberg loads, and DuckDB's iceberg_scan over its metadata file (local
tables only: DuckDB's S3 extension cannot be had here).

    python3 iceberg.py read URI NAMESPACE.TABLE --columns a,b [--snapshot ID] [--where COLUMN=VALUE (an integer or an ISO date-time if it is one)]
    python3 iceberg.py read http://HOST:PORT/iceberg NAMESPACE.TABLE --token TOKEN --columns a,b
    python3 iceberg.py refused http://HOST:PORT/iceberg NAMESPACE.TABLE --token TOKEN

`refused` prints the exception each of loading the table, listing its
namespace's tables and creating a namespace raises (or null).

Prints JSON: the catalog's namespaces and tables, the table's snapshots (id,
parent, summary), schema, partition spec, the files a scan plans (with and
without the filter; and how many DuckDB read, from its own plan), and the
rows each reader returns, as lists of the chosen columns.
"""

import argparse
import datetime
import decimal
import json
import os
import sys


def plain(value):
    if isinstance(value, (datetime.datetime, datetime.date)):
        return value.isoformat()
    if isinstance(value, decimal.Decimal):
        return str(value)
    return value


def rows_of(arrow, columns):
    cols = [arrow.column(c).to_pylist() for c in columns]
    return [[plain(v) for v in row] for row in zip(*cols)]


def read_duckdb(metadata, columns, snapshot, where):
    """DuckDB's rows, and the number of files its plan read."""
    from duckdb_wheels import duckdb_connection

    con = duckdb_connection("avro", "iceberg")
    scan = "iceberg_scan(?" + (f", snapshot_from_id => {snapshot})" if snapshot else ")")
    sql = f"SELECT {', '.join(columns)} FROM {scan}"
    params = [metadata]
    if where:
        column, value = where
        sql += f" WHERE {column} = ?"
        params.append(value)
    rows = rows_of(con.execute(sql, params).fetch_arrow_table(), columns)
    con.execute("PRAGMA enable_profiling = 'json'")
    (_, profile), *_ = con.execute("EXPLAIN ANALYZE " + sql, params).fetchall()

    def files_read(node):
        read = node.get("extra_info", {}).get("Total Files Read")
        return int(read) if read is not None else sum(files_read(c) for c in node.get("children", []))

    return rows, files_read(json.loads(profile))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("command", choices=["read", "refused"])
    parser.add_argument("uri")
    parser.add_argument("table")
    parser.add_argument("--token")
    parser.add_argument("--columns", default="")
    parser.add_argument("--snapshot", type=int)
    parser.add_argument("--where", default="")
    args = parser.parse_args()

    import polars as pl
    from pyiceberg.catalog.sql import SqlCatalog
    from pyiceberg.expressions import AlwaysTrue, EqualTo

    # A bucket's settings, from the environment the tests give every S3 client.
    io = {}
    if os.environ.get("AWS_ENDPOINT_URL"):
        io = {
            "s3.endpoint": os.environ["AWS_ENDPOINT_URL"],
            "s3.access-key-id": os.environ["AWS_ACCESS_KEY_ID"],
            "s3.secret-access-key": os.environ["AWS_SECRET_ACCESS_KEY"],
            "s3.region": os.environ.get("AWS_REGION", "us-east-1"),
        }
    if args.uri.startswith("http"):
        from pyiceberg.catalog.rest import RestCatalog

        catalog = RestCatalog("weir", uri=args.uri, token=args.token, **io)
    else:
        uri = args.uri if "://" in args.uri else "sqlite:///" + os.path.abspath(args.uri)
        # weir's PostgreSQL URL, as SQLAlchemy names the driver.
        uri = uri.replace("postgres://", "postgresql+psycopg2://", 1)
        catalog = SqlCatalog("weir", uri=uri, init_catalog_tables="false", **io)
    namespace = args.table.rsplit(".", 1)[0]
    if args.command == "refused":
        out = {}
        for name, attempt in [
            ("load_table", lambda: catalog.load_table(args.table)),
            ("list_tables", lambda: catalog.list_tables(namespace)),
            ("create_namespace", lambda: catalog.create_namespace(namespace + "_new")),
        ]:
            try:
                attempt()
                out[name] = None
            except Exception as e:  # what the client raises is the answer
                out[name] = {"type": type(e).__name__, "message": str(e)}
        json.dump(out, sys.stdout)
        return
    table = catalog.load_table(args.table)
    columns = args.columns.split(",")
    row_filter = AlwaysTrue()
    if args.where:
        column, value = args.where.split("=", 1)
        value = int(value) if value.lstrip("-").isdigit() else value
        try:
            value = datetime.datetime.fromisoformat(value)
        except (TypeError, ValueError):
            pass
        row_filter = EqualTo(column, value)
    scan = table.scan(row_filter=row_filter, snapshot_id=args.snapshot)
    everything = table.scan(snapshot_id=args.snapshot)
    out = {
        "namespaces": [".".join(n) for n in catalog.list_namespaces()],
        "tables": [".".join(t) for t in catalog.list_tables(namespace)],
        "location": table.metadata_location,
        "snapshots": [
            {
                "id": s.snapshot_id,
                "parent": s.parent_snapshot_id,
                "sequence": s.sequence_number,
                "summary": s.summary.additional_properties | {"operation": s.summary.operation.value},
            }
            for s in table.snapshots()
        ],
        "current": table.current_snapshot().snapshot_id if table.current_snapshot() else None,
        "schema": [[f.field_id, f.name, str(f.field_type), f.required] for f in table.schema().fields],
        "spec": [[f.source_id, f.field_id, f.name, str(f.transform)] for f in table.spec().fields],
        "files": sorted(t.file.file_path for t in everything.plan_files()),
        "pruned_files": sorted(t.file.file_path for t in scan.plan_files()),
        "rows": {"pyiceberg": rows_of(scan.to_arrow(), columns)},
    }
    lazy = pl.scan_iceberg(table, snapshot_id=args.snapshot)
    if args.where:
        lazy = lazy.filter(pl.col(column) == value)
    out["rows"]["polars"] = rows_of(lazy.select(columns).collect().to_arrow(), columns)
    if not table.metadata_location.startswith("s3://"):
        where = (column, value) if args.where else None
        out["rows"]["duckdb"], out["duckdb_files_read"] = read_duckdb(
            table.metadata_location, columns, args.snapshot, where
        )
    json.dump(out, sys.stdout, default=str)


if __name__ == "__main__":
    main()
    sys.stdout.flush()
    os._exit(0)
