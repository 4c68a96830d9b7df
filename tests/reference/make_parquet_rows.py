#!/usr/bin/env python3
"""make_parquet_rows.py — small Parquet files as pyarrow, pandas and datasets write them, covering
what ptrain's reader (src/data/parquet.c) must decode: every codec (none, Snappy, GZIP, ZSTD,
LZ4_RAW, Brotli), data pages v1 and v2, dictionary and plain values, DELTA_BINARY_PACKED,
DELTA_LENGTH_BYTE_ARRAY, DELTA_BYTE_ARRAY and BYTE_STREAM_SPLIT, several row groups and pages,
nullable columns, and the chat nesting (messages: list<struct<role, content>> with nulls, empty
lists and null items); the column types pyarrow, pandas and polars write beside chat columns
(dates, timestamps of every unit, UTC-adjusted or not, legacy INT96, times, decimals stored as
integers and as bytes, FLOAT16, small and unsigned integers, large and dictionary strings,
categoricals, null columns, fixed-size lists); files written by polars; and, beside each file,
the rows `datasets.load_dataset("parquet", ...)` gives for it as JSON Lines (NAME.rows.jsonl),
the Python objects it gives for dates, times and decimals written as str() writes them. tests/unit/test_dataset.c (test_parquet_rows)
compares every row. Run with the test Python environment (pyarrow, pandas, datasets):
    $PTRAIN_PYTHON tests/reference/make_parquet_rows.py tests/data/datasets/pq
"""
import datetime
import decimal
import json
import os
import shutil
import sys

import datasets
import pandas as pd
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq


def chat_table():
    msgs = pa.list_(pa.struct([("role", pa.string()), ("content", pa.string())]))
    rows = []
    for i in range(23):
        if i % 7 == 3:
            messages = None
        elif i % 5 == 4:
            messages = []
        else:
            messages = [{"role": "user", "content": f"question {i} " + "é" * (i % 3)},
                        {"role": "assistant", "content": None if i % 6 == 5 else f"answer {i}\nline two"}]
            if i % 4 == 0:
                messages.append(None)
        rows.append({
            "id": i * 1000003 - 7,
            "n": None if i % 3 == 1 else i - 11,
            "score": i / 8.0,
            "f32": i / 10.0,
            "flag": None if i % 5 == 2 else i % 2 == 0,
            "text": None if i % 4 == 2 else f"prefix-common-{i:03d}",
            "tags": None if i % 6 == 1 else [f"t{j}" for j in range(i % 3)],
            "messages": messages,
        })
    schema = pa.schema([("id", pa.int64()), ("n", pa.int32()), ("score", pa.float64()), ("f32", pa.float32()),
                        ("flag", pa.bool_()), ("text", pa.string()), ("tags", pa.list_(pa.string())),
                        ("messages", msgs)])
    return pa.Table.from_pylist(rows, schema=schema)


def write_all(out):
    t = chat_table()
    files = {}
    files["plain-none-v1.parquet"] = dict(compression="none", use_dictionary=False, data_page_version="1.0")
    files["dict-snappy-v2.parquet"] = dict(compression="snappy", data_page_version="2.0", row_group_size=5)
    files["dict-gzip-v1.parquet"] = dict(compression="gzip", row_group_size=10)
    files["zstd-v2-pages.parquet"] = dict(compression="zstd", data_page_version="2.0", data_page_size=64,
                                          write_batch_size=4, use_dictionary=False)
    files["lz4-v1.parquet"] = dict(compression="lz4", row_group_size=7)
    files["brotli-v2.parquet"] = dict(compression="brotli", data_page_version="2.0")
    files["delta.parquet"] = dict(compression="snappy", use_dictionary=False,
                                  column_encoding={"id": "DELTA_BINARY_PACKED", "n": "DELTA_BINARY_PACKED",
                                                   "text": "DELTA_BYTE_ARRAY", "tags": "DELTA_LENGTH_BYTE_ARRAY",
                                                   "score": "BYTE_STREAM_SPLIT", "f32": "BYTE_STREAM_SPLIT",
                                                   "messages.list.element.role": "DELTA_BYTE_ARRAY",
                                                   "messages.list.element.content": "DELTA_LENGTH_BYTE_ARRAY"})
    files["delta-v2-pages.parquet"] = dict(compression="none", use_dictionary=False, data_page_version="2.0",
                                           data_page_size=100, write_batch_size=3,
                                           column_encoding={"id": "DELTA_BINARY_PACKED", "text": "DELTA_BYTE_ARRAY"})
    for name, kw in files.items():
        pq.write_table(t, os.path.join(out, name), **kw)
    # pandas, Alpaca columns with None
    pd.DataFrame({"instruction": ["Say hi", "Add", "Name"], "input": [None, "2 + 2", ""],
                  "output": ["Hello!", "4", "Ptrain"]}).to_parquet(os.path.join(out, "pandas-alpaca.parquet"))
    # datasets' own writer, ShareGPT conversations
    conv = [{"conversations": [{"from": "human", "value": f"hi {i}"}, {"from": "gpt", "value": f"hello {i}"}]}
            for i in range(4)]
    datasets.Dataset.from_list(conv).to_parquet(os.path.join(out, "datasets-sharegpt.parquet"))
    return sorted(list(files) + ["pandas-alpaca.parquet", "datasets-sharegpt.parquet"])


def types_table():
    """A chat column beside the column types writers produce (three rows: values, nulls, edges)."""
    d, D = datetime, decimal.Decimal
    msgs = [[{"role": "user", "content": f"q{i}"}, {"role": "assistant", "content": f"a{i}"}] for i in range(3)]
    cols = {
        "messages": pa.array(msgs),
        "date32": pa.array([d.date(2024, 1, 2), None, d.date(1969, 12, 31)], pa.date32()),
        "date64": pa.array([d.date(2024, 2, 29), None, d.date(1900, 3, 1)], pa.date64()),
        "ts_s": pa.array([d.datetime(2024, 1, 2, 3, 4, 5), None, d.datetime(1960, 1, 1)], pa.timestamp("s")),
        "ts_ms": pa.array([d.datetime(2024, 1, 2, 3, 4, 5, 123000), None, d.datetime(1960, 1, 1, 0, 0, 0, 1000)],
                          pa.timestamp("ms")),
        "ts_us_utc": pa.array([d.datetime(2024, 1, 2, 3, 4, 5, 123456), None, d.datetime(1, 1, 1)],
                              pa.timestamp("us", tz="UTC")),
        "ts_ns": pa.array([1704164645123456789, None, -1], pa.timestamp("ns")),
        "ts_ns_us": pa.array([1704164645123456000, None, 0], pa.timestamp("ns")),
        "t32": pa.array([d.time(3, 4, 5, 120000), None, d.time(0, 0)], pa.time32("ms")),
        "t64": pa.array([d.time(3, 4, 5, 123456), None, d.time(23, 59, 59)], pa.time64("us")),
        "t64ns": pa.array([11045123456789, None, 0], pa.time64("ns")),
        "dec": pa.array([D("1.50"), None, D("-0.05")], pa.decimal128(5, 2)),
        "dec_small": pa.array([D("0.0000001"), None, D("0E-10")], pa.decimal128(12, 10)),
        "dec_big": pa.array([D("12345678901234567890.123"), None, D("-1")], pa.decimal128(38, 3)),
        "dec_int": pa.array([D("123"), None, D("-99999")], pa.decimal128(9, 0)),
        "f16": pa.array([1.5, None, -2.0], pa.float16()),
        "u8": pa.array([255, None, 0], pa.uint8()),
        "u32": pa.array([4294967295, None, 0], pa.uint32()),
        "i8": pa.array([-128, None, 1], pa.int8()),
        "lstr": pa.array(["x", None, "y"], pa.large_string()),
        "dictstr": pa.array(["a", None, "a"]).dictionary_encode(),
        "nul": pa.array([None, None, None], pa.null()),
        "fsl": pa.array([[1, 2], None, [3, 4]], pa.list_(pa.int32(), 2)),
    }
    return pa.table(cols)


def write_types(out):
    t = types_table()
    msgs = t.column("messages")
    pq.write_table(t, os.path.join(out, "types-pyarrow.parquet"))
    pq.write_table(t, os.path.join(out, "types-decimal-int.parquet"),
                   store_decimal_as_integer=True, compression="zstd")
    pq.write_table(t.select(["messages", "ts_ns"]), os.path.join(out, "types-int96.parquet"),
                   use_deprecated_int96_timestamps=True)
    # pandas: datetime64 (ns, and UTC us), a categorical, nullable integers and booleans, strings
    df = pd.DataFrame({
        "text": ["one", "two", None],
        "when": pd.to_datetime(["2024-01-02 03:04:05.5", "NaT", "1999-12-31 23:59:59"], format="ISO8601").astype("datetime64[ns]"),
        "when_utc": pd.to_datetime(["2024-01-02 03:04:05", "NaT", "2000-01-01 00:00:00"], utc=True).astype("datetime64[us, UTC]"),
        "day": [datetime.date(2024, 1, 2), None, datetime.date(2000, 2, 29)],
        "kind": pd.Categorical(["a", "b", "a"]),
        "n": pd.array([1, None, 3], dtype="Int64"),
        "ok": pd.array([True, None, False], dtype="boolean"),
    })
    df.to_parquet(os.path.join(out, "pandas-types.parquet"))
    # polars: its own writer (ZSTD, its page layout), chat rows and its column types
    frame = pl.DataFrame({
        "messages": [[{"role": "user", "content": f"hi {i}"}, {"role": "assistant", "content": f"hello {i}"}]
                     if i % 3 else None for i in range(7)],
        "when": [datetime.datetime(2024, 1, i + 1, 12, 30, 0, 250 * i) for i in range(7)],
        "day": [datetime.date(2024, 3, i + 1) for i in range(7)],
        "at": [datetime.time(i, 15, 30) for i in range(7)],
        "kind": pl.Series(["x", "y", "x", None, "y", "x", "x"], dtype=pl.Categorical),
        "level": pl.Series(["lo", "hi", "lo", "hi", None, "lo", "hi"], dtype=pl.Enum(["lo", "hi"])),
        "price": pl.Series([decimal.Decimal(x) if x else None for x in ["1.25", "-3.50", "", "0.01", "100.00", "7.77", "0.00"]],
                           dtype=pl.Decimal(10, 2)),
        "big": pl.Series([2**62, -5, 0, None, 7, 8, 9], dtype=pl.Int64),
        "u": pl.Series([1, 2, 3, 4, 5, 6, None], dtype=pl.UInt32),
        "tags": [["a", "b"], [], None, ["c"], ["d", None], [], ["e"]],
        "pair": pl.Series([[1, 2], [3, 4], None, [5, 6], [7, 8], [9, 10], [11, 12]], dtype=pl.Array(pl.Int16, 2)),
        "nothing": pl.Series([None] * 7, dtype=pl.Null),
    })
    frame.write_parquet(os.path.join(out, "polars-chat.parquet"))
    frame.write_parquet(os.path.join(out, "polars-snappy-groups.parquet"), compression="snappy", row_group_size=2,
                        data_page_size=64)
    # ShareGPT conversations as polars writes them
    pl.DataFrame({"conversations": [[{"from": "human", "value": f"q {i}"}, {"from": "gpt", "value": f"a {i}"}]
                                    for i in range(3)]}).write_parquet(os.path.join(out, "polars-sharegpt.parquet"))
    # column types a chat row cannot use: ptrain refuses these files, naming the column (no rows kept)
    pq.write_table(pa.table({"messages": pa.array(msgs), "meta": pa.array([[("k", "v")], None, []],
                                                                          pa.map_(pa.string(), pa.string()))}),
                   os.path.join(out, "refused-map.parquet"))
    pq.write_table(pa.table({"messages": pa.array(msgs), "digest": pa.array([b"0123", None, b"abcd"], pa.binary(4))}),
                   os.path.join(out, "refused-fixed.parquet"))
    # the first 40 conversations of the shipped sample data as datasets writes them, in row groups of 8:
    # tests/cli/test_formats.sh trains on it and on its rows as JSON Lines
    sample = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "share", "data",
                          "pirate-instructions.jsonl")
    rows = [json.loads(line) for line in open(sample, encoding="utf-8")][:40]
    datasets.Dataset.from_list(rows).to_parquet(os.path.join(out, "pirate-40.parquet"), batch_size=8)
    return ["pirate-40.parquet", "types-pyarrow.parquet", "types-decimal-int.parquet", "types-int96.parquet", "pandas-types.parquet",
            "polars-chat.parquet", "polars-snappy-groups.parquet", "polars-sharegpt.parquet"]


# a dataset snapshot in the HF cache as huggingface_hub lays it out: two train shards and a test split
SNAPSHOT = "hfcache/datasets--acme--tables/snapshots/0123456789abcdef0123456789abcdef01234567/data"


def write_snapshot(out):
    snap = os.path.join(out, "..", SNAPSHOT)
    os.makedirs(snap, exist_ok=True)
    rows = [{"messages": [{"role": "user", "content": f"Question {i}?"}, {"role": "assistant", "content": f"Answer {i}."}]}
            for i in range(4)]
    ds = datasets.Dataset.from_list(rows)
    ds.select([0, 1]).to_parquet(os.path.join(snap, "train-00000-of-00002.parquet"))
    ds.select([2]).to_parquet(os.path.join(snap, "train-00001-of-00002.parquet"))
    ds.select([3]).to_parquet(os.path.join(snap, "test-00000-of-00001.parquet"))
    # what load_dataset gives for the snapshot folder, each split (the files it picks, in its order)
    for split in ("train", "test"):
        got = datasets.load_dataset(os.path.dirname(snap), split=split, cache_dir=os.path.join(out, ".cache"))
        with open(os.path.join(out, f"snapshot-tables.{split}.rows.jsonl"), "w", encoding="utf-8") as f:
            for row in got:
                f.write(json.dumps(row, ensure_ascii=False) + "\n")


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "tests/data/datasets/pq"
    os.makedirs(out, exist_ok=True)
    cache = os.path.join(out, ".cache")
    write_snapshot(out)
    for name in write_all(out) + write_types(out):
        path = os.path.join(out, name)
        ds = datasets.load_dataset("parquet", data_files=os.path.abspath(path), split="train", cache_dir=cache)
        with open(path + ".rows.jsonl", "w", encoding="utf-8") as f:
            for row in ds:
                f.write(json.dumps(row, ensure_ascii=False, default=str) + "\n")
    shutil.rmtree(cache, ignore_errors=True)


if __name__ == "__main__":
    main()
