#!/usr/bin/env python3
"""make_parquet_rows.py — small Parquet files as pyarrow, pandas and datasets write them, covering
what ptrain's reader (src/data/parquet.c) must decode: every codec (none, Snappy, GZIP, ZSTD,
LZ4_RAW, Brotli), data pages v1 and v2, dictionary and plain values, DELTA_BINARY_PACKED,
DELTA_LENGTH_BYTE_ARRAY, DELTA_BYTE_ARRAY and BYTE_STREAM_SPLIT, several row groups and pages,
nullable columns, and the chat nesting (messages: list<struct<role, content>> with nulls, empty
lists and null items), and, beside each file, the rows `datasets.load_dataset("parquet", ...)`
gives for it as JSON Lines (NAME.rows.jsonl). tests/unit/test_dataset.c (test_parquet_rows)
compares every row. Run with the test Python environment (pyarrow, pandas, datasets):
    $PTRAIN_PYTHON tests/reference/make_parquet_rows.py tests/data/datasets/pq
"""
import json
import os
import shutil
import sys

import datasets
import pandas as pd
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


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "tests/data/datasets/pq"
    os.makedirs(out, exist_ok=True)
    write_snapshot(out)
    cache = os.path.join(out, ".cache")
    for name in write_all(out):
        path = os.path.join(out, name)
        ds = datasets.load_dataset("parquet", data_files=os.path.abspath(path), split="train", cache_dir=cache)
        with open(path + ".rows.jsonl", "w", encoding="utf-8") as f:
            for row in ds:
                f.write(json.dumps(row, ensure_ascii=False) + "\n")
    shutil.rmtree(cache, ignore_errors=True)


if __name__ == "__main__":
    main()
