#!/usr/bin/env python3
"""make_csv_rows.py — CSV and TSV files with the hard cases of RFC 4180 and of pandas' typing
(quoted separators, embedded line breaks and quotes, empty fields and NA words, a BOM, CRLF
line ends, blank lines, short rows, typed columns, a TSV file) and, beside each, the rows
`datasets.load_dataset("csv", ...)` gives for it as JSON Lines (NAME.rows.jsonl).
tests/unit/test_dataset.c (test_csv_rows) reads each file with ptrain's reader and compares every
row with these. Run with the test Python environment (datasets, pandas):
    $PTRAIN_PYTHON tests/reference/make_csv_rows.py tests/data/datasets/csv
"""
import json
import os
import sys

import datasets

FILES = {
    "alpaca.csv": 'instruction,input,output\n'
                  'Say hi,,"Hello, world!"\n'
                  '"Write ""two"" lines",x,"one\ntwo"\n'
                  '\n'
                  'Count,"1, 2",three\n',
    "crlf-bom.csv": '\ufefftext,label\r\n"a\r\nb",1\r\nplain,2\r\n',
    "types.csv": 'i,f,b,s,n,mixed,empty\n'
                 '1,1.5,True,NA,7,3,\n'
                 '-2,2,false,x,,four,\n'
                 '+3,-0.25e1,FALSE,null,9,5.5,\n',
    "short.csv": 'a,b,c\n1,2\n"4",5,6\n',
    "names.csv": 'x,,x,"y,z"\n1,2,3,4\n',
    "quotes.csv": 'q,r\n"ab"cd,e"f\n"",""""\n',
    "data.tsv": 'instruction\tinput\toutput\n'
                'Tab\t"a\tb"\tc\n'
                'Quote\t\t"say ""x"""\n',
}


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "tests/data/datasets/csv"
    os.makedirs(out, exist_ok=True)
    for name, text in FILES.items():
        path = os.path.join(out, name)
        with open(path, "w", encoding="utf-8", newline="") as f:
            f.write(text)
        kwargs = {"sep": "\t"} if name.endswith(".tsv") else {}
        ds = datasets.load_dataset("csv", data_files=os.path.abspath(path), split="train",
                                   cache_dir=os.path.join(out, ".cache"), **kwargs)
        with open(path + ".rows.jsonl", "w", encoding="utf-8") as f:
            for row in ds:
                f.write(json.dumps(row, ensure_ascii=False) + "\n")
    import shutil
    shutil.rmtree(os.path.join(out, ".cache"), ignore_errors=True)


if __name__ == "__main__":
    main()
