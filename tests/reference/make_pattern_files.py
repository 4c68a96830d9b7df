#!/usr/bin/env python3
"""make_pattern_files.py — a folder of small data files laid out as Hub datasets are (nested
folders, shards, a hidden file and folder, a __special__ folder (not __pycache__, which .gitignore leaves out), README.md and dataset_info.json
beside the data), and the files `datasets`' own resolver (datasets.data_files.resolve_pattern, what
load_dataset and a README's configs: data_files use) gives for each of a list of patterns, `**`
among them, as paths relative to the folder (patterns.json; [] where datasets finds none); and
folders laid out as Hub datasets without a loading script are (sharded data/SPLIT-*-of-* names
with a custom split, split folders, split words in file names, none), with the files datasets'
get_data_patterns + DataFilesDict.from_patterns (what load_dataset does for such a folder) gives
each split, or the splits there are when it has not the one asked for (splits.json).
tests/unit/test_dataset.c (test_patterns_as_datasets, test_splits_as_datasets) resolves the same
patterns with ptrain's pattern.c and picks the same splits with splits.c, and compares. Run with the test Python environment (datasets):
    $PTRAIN_PYTHON tests/reference/make_pattern_files.py tests/data/datasets/patterns
"""
import json
import os
import shutil
import sys

from datasets.data_files import DataFilesList, get_data_patterns, resolve_pattern
from datasets.packaged_modules import _ALL_ALLOWED_EXTENSIONS

FILES = [
    "README.md", "dataset_info.json", "top.jsonl", "notes.txt",
    "data/train-00000-of-00002.parquet", "data/train-00001-of-00002.parquet", "data/test-00000-of-00001.parquet",
    "data/extra/train-more.jsonl", "data/extra/deeper/train-deep.jsonl", "data/.hidden.jsonl",
    "data/.cache/train-cached.jsonl", "data/__special__/train-x.jsonl", "data/README.md",
    "en/train/part-0.csv", "en/train/part-1.csv", "en/validation/part-0.csv", "fr/train/part-0.csv",
]

PATTERNS = [
    "data/*", "data/**", "data/**/*.jsonl", "data/**/train-*", "**/train-*", "**", "**/*.csv", "*/train/*.csv",
    "en/**", "data/train-*-of-*.parquet", "data/.*", "data/.cache/*", "data/__special__/*", "data/__*/*",
    "**/README.md", "data/README.md", "top.jsonl", "missing/*", "d?ta/t[er]*", "en/*/part-[0-9].csv",
]


LAYOUTS = {
    "sharded": ["data/train-00000-of-00002.parquet", "data/train-00001-of-00002.parquet",
                "data/test-00000-of-00001.parquet", "data/train_prefs-00000-of-00001.parquet", "extra.jsonl",
                "README.md"],
    "folders": ["train/b.jsonl", "train/a.jsonl", "en/validation/x.jsonl", "my-test/y.csv", "training/c.jsonl",
                "other/z.jsonl"],
    "names": ["train.jsonl", "dev.jsonl", "testing.csv", "my-train-2.jsonl", "trainer.jsonl", "constrained.jsonl",
              "data/x.train.json", "valid_0.jsonl"],
    "none": ["a.jsonl", "b/c.jsonl", "trainer.jsonl"],
}
SPLITS = ["train", "validation", "test", "train_prefs"]


def write_splits(out):
    want = {}
    for name, files in LAYOUTS.items():
        base = os.path.abspath(os.path.join(out, "splits", name))
        for f in files:
            path = os.path.join(base, f)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            open(path, "w").close()
        patterns = get_data_patterns(base)
        got = {}
        for split in SPLITS:
            if split in patterns:
                files = DataFilesList.from_patterns(patterns[split], base, allowed_extensions=_ALL_ALLOWED_EXTENSIONS)
                got[split] = [os.path.relpath(f, base) for f in files]
            else:
                got[split] = {"not there": [str(k) for k in patterns]}
        want[name] = got
    with open(os.path.join(out, "splits.json"), "w") as fh:
        json.dump(want, fh, indent=1)
        fh.write("\n")


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "tests/data/datasets/patterns"
    shutil.rmtree(out, ignore_errors=True)
    for f in FILES:
        path = os.path.join(out, "tree", f)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as fh:
            fh.write("")
    base = os.path.abspath(os.path.join(out, "tree"))
    want = {}
    for p in PATTERNS:
        try:
            got = resolve_pattern(p, base)
        except FileNotFoundError:
            got = []
        want[p] = sorted(os.path.relpath(g, base) for g in got)
    with open(os.path.join(out, "patterns.json"), "w") as fh:
        json.dump(want, fh, indent=1)
        fh.write("\n")
    write_splits(out)


if __name__ == "__main__":
    main()
