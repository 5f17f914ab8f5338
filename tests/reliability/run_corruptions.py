"""Corrupted copies of a real run directory: each turns one thing the report reads into nonsense."""
import json
import os
import shutil

import numpy as np
import pandas as pd


def _meta(d, fn):
    m = json.loads((d / "meta.json").read_text())
    fn(m)
    (d / "meta.json").write_text(json.dumps(m))

def _table(d, name, fn):
    df = fn(pd.read_parquet(d / f"{name}.parquet"))
    df.to_parquet(d / f"{name}.parquet", index=False)

def _replace(path, make):
    path.unlink()
    make(path)

def setcol(df, col, v):
    df = df.copy()
    df[col] = v
    return df

CORRUPTIONS = {
    "checks not a list": lambda d: (d / "checks.json").write_text('{"checks": "x", "verdict": "pass"}'),
    "checks entries not objects": lambda d: (d / "checks.json").write_text('{"checks": [1, "a"], "verdict": 3}'),
    "checks a list": lambda d: (d / "checks.json").write_text('[]'),
    "matrix a list": lambda d: _meta(d, lambda m: m.update(matrix=[1, 2])),
    "matrix a string": lambda d: _meta(d, lambda m: m.update(matrix="x")),
    "link values strings": lambda d: _meta(d, lambda m: m["link"].update(rate_mbps="fast", rtt_ms="10", buffer_bdp="1",
                                                                         bdp_bytes="x")),
    "link a list": lambda d: _meta(d, lambda m: m.update(link=[1])),
    "flows entries strings": lambda d: _meta(d, lambda m: m.update(flows=["a", 1])),
    "flow fields wrong": lambda d: _meta(d, lambda m: [f.update(flow="x", rtt_ms="slow", cc=5) for f in m["flows"]]),
    "repetition a dict": lambda d: _meta(d, lambda m: m.update(repetition={"a": 1}, scenario=["x"], duration_s="long")),
    "meta a list": lambda d: (d / "meta.json").write_text("[]"),
    "meta not utf8": lambda d: (d / "meta.json").write_bytes(b'{"a": "\xff"}'),
    "throughput nan": lambda d: _table(d, "throughput", lambda df: setcol(df, "bytes", np.nan)),
    "throughput inf": lambda d: _table(d, "throughput", lambda df: setcol(df, "bytes", np.inf)),
    "throughput t inf": lambda d: _table(d, "throughput", lambda df: setcol(df, "t_s", np.inf)),
    "interval zero": lambda d: _table(d, "throughput", lambda df: setcol(df, "interval_s", 0.0)),
    "ss in throughput": lambda d: shutil.copy(d / "ss.parquet", d / "throughput.parquet"),
    "qdisc in ss": lambda d: shutil.copy(d / "qdisc.parquet", d / "ss.parquet"),
    "throughput in qdisc": lambda d: shutil.copy(d / "throughput.parquet", d / "qdisc.parquet"),
    "ping in flows": lambda d: shutil.copy(d / "ping.parquet", d / "flows.parquet"),
    "flows in ping": lambda d: shutil.copy(d / "flows.parquet", d / "ping.parquet"),
    "truncated qdisc": lambda d: (d / "qdisc.parquet").write_bytes((d / "qdisc.parquet").read_bytes()[:100]),
    "flow ids text": lambda d: _table(d, "throughput", lambda df: setcol(df, "flow", "a")),
    "empty throughput": lambda d: _table(d, "throughput", lambda df: df.iloc[0:0]),
    "ss nan": lambda d: _table(d, "ss", lambda df: setcol(df, "srtt_ms", np.inf)),
    "qdisc strings": lambda d: _table(d, "qdisc", lambda df: setcol(df, "backlog_bytes", "x")),
    "status odd": lambda d: _meta(d, lambda m: m.update(status=["x"], error={"a": 1})),
    "no meta": lambda d: (d / "meta.json").unlink(),
    # a run directory shared by others: links and special files are named and never read
    "meta a link": lambda d: _replace(d / "meta.json", lambda p: p.symlink_to("../good/meta.json")),
    "checks a link to /dev/zero": lambda d: _replace(d / "checks.json", lambda p: p.symlink_to("/dev/zero")),
    "throughput a link": lambda d: _replace(d / "throughput.parquet",
                                            lambda p: p.symlink_to("../good/throughput.parquet")),
    "ss a FIFO": lambda d: _replace(d / "ss.parquet", os.mkfifo),
    "qdisc a folder": lambda d: _replace(d / "qdisc.parquet", os.mkdir),
}
