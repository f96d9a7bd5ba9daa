"""Independent readers of weir's Delta tables: DuckDB (its delta extension, on
delta-kernel-rs), Polars and deltalake (delta-rs). None of them is weir's code.

    python3 delta.py read TABLE_DIR --key COLUMN [--versions 1,2,5] [--txn APP_ID ...]

prints one JSON object: for each version, each reader's row count and the
sorted values of COLUMN; the latest version each reader sees; and, from
deltalake, the stored transaction version of each APP_ID.

    python3 delta.py write TABLE_DIR compact|z-order COLUMN|delete PREDICATE|
                                     update PREDICATE COLUMN SQL|add-column NAME TYPE|
                                     set-property KEY VALUE|add-feature FEATURE|drop-feature FEATURE

    python3 delta.py partitions TABLE_DIR --columns A,B,C [--version N] [--where COLUMN=VALUE]

prints, for a partitioned table, its partition columns and configuration as
deltalake reads them, each reader's rows as the sorted lists of COLUMNS
(all of them, or those WHERE matches), and the files deltalake prunes to
for WHERE (a partition filter: only that partition's files are read).

    python3 delta.py write TABLE_DIR ...

commits to the table as another engine would (deltalake, delta-rs), and
prints the new version. `drop-feature` writes the protocol without the
feature, as Spark's ALTER TABLE DROP FEATURE does (delta-rs has no such call).

TABLE_DIR may be s3://BUCKET/PREFIX/...: Polars and deltalake then read it
from the bucket with the AWS_* environment (AWS_ENDPOINT_URL for an
S3-compatible store). DuckDB reads S3 through its httpfs extension, which
cannot be had here, so it reads local tables only.
"""

import argparse
import json
import os
import sys


def duckdb_connection():
    from duckdb_wheels import duckdb_connection

    return duckdb_connection("delta")


def read_duckdb(con, table, version, key):
    rows = con.execute(f"SELECT {key} FROM delta_scan(?, version => {version})", [table]).fetchall()
    return sorted(r[0] for r in rows)


def storage_options(table):
    """The bucket's settings, from the environment, for a table in S3."""
    if not table.startswith("s3://"):
        return None
    names = ["AWS_ENDPOINT_URL", "AWS_ALLOW_HTTP", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_REGION"]
    options = {name: os.environ[name] for name in names if name in os.environ}
    # deltalake writes commits put-if-absent only when told the store takes
    # conditional PUT (as weir's does): two writers never overwrite each other.
    options["AWS_CONDITIONAL_PUT"] = "etag"
    return options


def read_polars(table, version, key):
    import polars as pl

    scan = pl.scan_delta(table, version=version, storage_options=storage_options(table))
    return sorted(scan.select(key).collect()[key].to_list())


def read_deltalake(table, version, key):
    import deltalake

    t = deltalake.DeltaTable(table, version=version, storage_options=storage_options(table))
    return sorted(t.to_pyarrow_table(columns=[key]).column(key).to_pylist())


def write(table, action, args):
    import time

    import deltalake
    from deltalake.exceptions import CommitFailedError

    def apply(t):
        if action == "compact":
            t.optimize.compact()
        elif action == "z-order":
            t.optimize.z_order(args)
        elif action == "delete":
            t.delete(args[0])
        elif action == "update":
            predicate, column, value = args
            t.update(updates={column: value}, predicate=predicate)
        elif action == "add-column":
            name, kind = args
            t.alter.add_columns(deltalake.Field(name, kind, nullable=True))
        elif action == "set-property":
            t.alter.set_table_properties({args[0]: args[1]})
        elif action == "add-feature":
            feature = getattr(deltalake.TableFeatures, args[0])
            t.alter.add_feature(feature, allow_protocol_versions_increase=True)
        elif action == "drop-feature":
            drop_feature(t, args[0])
        else:
            raise SystemExit(f"unknown action {action}")

    # A writer that loses a race to a conflicting commit tries again, as any would.
    for attempt in range(10):
        t = deltalake.DeltaTable(table, storage_options=storage_options(table))
        try:
            apply(t)
            break
        except (CommitFailedError, FileExistsError):
            if attempt == 9:
                raise
            time.sleep(0.2)
    # The version this action committed (the table object moved to it), not
    # the latest: weir may have committed after it already.
    json.dump({"version": t.version()}, sys.stdout)


def drop_feature(t, drop):
    p = t.protocol()
    protocol = {"minReaderVersion": p.min_reader_version, "minWriterVersion": p.min_writer_version}
    if p.reader_features is not None:
        protocol["readerFeatures"] = [f for f in p.reader_features if f != drop]
    if p.writer_features is not None:
        protocol["writerFeatures"] = [f for f in p.writer_features if f != drop]
    version = t.version() + 1
    commit = [
        {"commitInfo": {"operation": "DROP FEATURE", "engineInfo": "weir-tests/drop-feature", "timestamp": 0}},
        {"protocol": protocol},
    ]
    path = os.path.join(t.table_uri.removeprefix("file://"), "_delta_log", f"{version:020}.json")
    with open(path, "x") as f:  # put-if-absent, as every Delta writer commits
        f.write("".join(json.dumps(a) + "\n" for a in commit))


def partitions(table, columns, version, where):
    import deltalake
    import polars as pl

    t = deltalake.DeltaTable(table, version=version)
    column, value = where.split("=", 1) if where else (None, None)
    select = ", ".join(f'"{c}"' for c in columns)
    sql = f"SELECT {select} FROM delta_scan(?, version => {t.version()})"
    params = [table]
    if column:
        sql += f' WHERE CAST("{column}" AS VARCHAR) = ?'
        params.append(value)
    rows = {"duckdb": [list(r) for r in duckdb_connection().execute(sql, params).fetchall()]}
    scan = pl.scan_delta(table, version=t.version())
    if column:
        scan = scan.filter(pl.col(column).cast(pl.String) == value)
    rows["polars"] = [list(r) for r in scan.select(columns).collect().rows()]
    filters = [(column, "=", value)] if column else None
    arrow = t.to_pyarrow_table(columns=columns, partitions=filters)
    rows["deltalake"] = [list(r.values()) for r in arrow.to_pylist()]
    out = {
        "version": t.version(),
        "partition_columns": t.metadata().partition_columns,
        "configuration": t.metadata().configuration,
        "files": t.file_uris(),
        "pruned_files": t.file_uris(partition_filters=filters) if filters else None,
        "rows": {name: sorted(r, key=lambda r: json.dumps(r, default=str)) for name, r in rows.items()},
    }
    json.dump(out, sys.stdout, default=str)


def main():
    if sys.argv[1:2] == ["partitions"]:
        parser = argparse.ArgumentParser()
        parser.add_argument("command")
        parser.add_argument("table")
        parser.add_argument("--columns", required=True)
        parser.add_argument("--version", type=int)
        parser.add_argument("--where", default="")
        args = parser.parse_args()
        return partitions(os.path.abspath(args.table), args.columns.split(","), args.version, args.where)
    if sys.argv[1:2] == ["write"]:
        table = sys.argv[2] if sys.argv[2].startswith("s3://") else os.path.abspath(sys.argv[2])
        return write(table, sys.argv[3], sys.argv[4:])
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="command", required=True)
    read = sub.add_parser("read")
    read.add_argument("table")
    read.add_argument("--key", required=True)
    read.add_argument("--versions", default="")
    read.add_argument("--txn", action="append", default=[])
    args = parser.parse_args()

    import deltalake

    table = args.table if args.table.startswith("s3://") else os.path.abspath(args.table)
    latest = deltalake.DeltaTable(table, storage_options=storage_options(table))
    versions = [int(v) for v in args.versions.split(",") if v] or list(range(1, latest.version() + 1))
    con = None if storage_options(table) else duckdb_connection()
    out = {
        "latest": latest.version(),
        "versions": {},
        "txn": {},
        "schema": json.loads(latest.schema().to_json()),
        "configuration": latest.metadata().configuration,
    }
    for v in versions:
        readers = {
            "polars": read_polars(table, v, args.key),
            "deltalake": read_deltalake(table, v, args.key),
        }
        if con is not None:
            readers["duckdb"] = read_duckdb(con, table, v, args.key)
        out["versions"][str(v)] = {name: {"rows": len(keys), "keys": keys} for name, keys in readers.items()}
    for app_id in args.txn:
        out["txn"][app_id] = latest.transaction_version(app_id)
    json.dump(out, sys.stdout, default=str)


if __name__ == "__main__":
    main()
    # Every reader is done and the answer is written. Leave without the
    # interpreter's teardown: reading S3 tables, Polars' and deltalake's native
    # threads were now and then torn down under it, and the process aborted
    # ("terminate called without an active exception") after printing.
    sys.stdout.flush()
    os._exit(0)
