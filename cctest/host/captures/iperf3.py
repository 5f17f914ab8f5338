"""iperf3: each flow's client (`iperf3 -J`) output -> raw/iperf3-<flow>.json -> the flows table
(one row per flow: identity and iperf3's own totals) and the throughput table (sender intervals).

Nothing to start: the flows are the run itself (runner.Run._run_flows starts the servers and
clients, host/net/traffic.py, into the files named here)."""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .base import US_PER_MS, Capture, RunView, flow_number, num

if TYPE_CHECKING:  # imported where used: the guest's run path starts without pandas
    import pandas as pd

CLIENT_FILE = "iperf3-<flow>.json"
SERVER_FILE = "iperf3-server-<flow>.log"


def client_file(flow: int) -> str:
    return CLIENT_FILE.replace("<flow>", str(flow))


def server_file(flow: int) -> str:
    return SERVER_FILE.replace("<flow>", str(flow))


INTERVAL_COLUMNS = ["t_rel_s", "interval_s", "bytes", "bits_per_second", "retransmits", "snd_cwnd_bytes", "rtt_ms"]


def _no_intervals() -> pd.DataFrame:
    import pandas as pd

    return pd.DataFrame(columns=INTERVAL_COLUMNS)


@dataclass
class Iperf3Result:
    """What could be read from one iperf3 -J client output.  Missing values are None/NaN."""

    local_port: int | None = None
    remote_port: int | None = None
    bytes_sent: float = math.nan
    bytes_received: float = math.nan
    retransmits: float = math.nan
    mean_rtt_ms: float = math.nan
    max_snd_cwnd_bytes: float = math.nan
    sender_seconds: float = math.nan
    error: str | None = None
    complete: bool = False  # the whole document parsed
    # one row per interval: t_rel_s (interval end, relative to the client's start), interval_s,
    # bytes, bits_per_second, retransmits, snd_cwnd_bytes, rtt_ms
    intervals: pd.DataFrame = field(default_factory=_no_intervals)


def _salvage_json_object(text: str) -> tuple[dict, bool]:
    """Parse a JSON object, keeping every complete top-level member of a truncated one.

    A list-valued member that is cut off keeps its complete elements (iperf3's ``intervals``).
    Returns (object, complete).
    """
    try:
        obj = json.loads(text)
        return (obj, True) if isinstance(obj, dict) else ({}, False)
    except json.JSONDecodeError:
        pass
    dec = json.JSONDecoder()
    ws = re.compile(r"\s*")

    def past_ws(pos: int) -> int:
        match = ws.match(text, pos)  # always matches (maybe nothing)
        return match.end() if match else pos
    out: dict = {}
    pos = past_ws(0)
    if not text.startswith("{", pos):
        return out, False
    pos += 1
    while True:
        pos = past_ws(pos)
        try:
            key, pos = dec.raw_decode(text, pos)
        except json.JSONDecodeError:
            return out, False
        pos = past_ws(pos)
        if not text.startswith(":", pos) or not isinstance(key, str):
            return out, False
        pos = past_ws(pos + 1)
        try:
            out[key], pos = dec.raw_decode(text, pos)
        except json.JSONDecodeError:
            if text.startswith("[", pos):  # keep the complete elements of a cut-off list
                items = []
                pos += 1
                while True:
                    pos = past_ws(pos)
                    try:
                        item, pos = dec.raw_decode(text, pos)
                    except json.JSONDecodeError:
                        break
                    items.append(item)
                    pos = past_ws(pos)
                    if text.startswith(",", pos):
                        pos += 1
                out[key] = items
            return out, False
        pos = past_ws(pos)
        if text.startswith(",", pos):
            pos += 1
        elif text.startswith("}", pos):
            return out, True
        else:
            return out, False


def _get(obj: Any, *path: str | int, default: Any = None) -> Any:
    for p in path:
        if isinstance(obj, dict):
            obj = obj.get(p)
        elif isinstance(obj, list) and isinstance(p, int) and -len(obj) <= p < len(obj):
            obj = obj[p]
        else:
            return default
    return default if obj is None else obj


def parse_iperf3_json(text: str) -> Iperf3Result:
    """iperf3 3.x client ``-J`` output -> Iperf3Result; never raises.

    Totals come from ``end``: bytes_sent/retransmits from ``sum_sent``, bytes_received from
    ``sum_received``, mean RTT and max cwnd from ``streams[0].sender``.  When the client was
    interrupted before it got the server's results (``error`` set and a receiver total of 0)
    bytes_received is NaN rather than a false 0.  When it was interrupted before the test began
    (no ``start.test_start``) there are no interval rows.  Interval rows use the ``sum`` entry for
    bytes/rate/retransmits and ``streams[0]`` for cwnd and RTT (iperf3 reports RTT in us).
    """
    import pandas as pd

    doc, complete = _salvage_json_object(text)
    res = Iperf3Result(complete=complete)
    res.error = _get(doc, "error")
    lp = _get(doc, "start", "connected", 0, "local_port")
    rp = _get(doc, "start", "connected", 0, "remote_port")
    res.local_port = int(lp) if isinstance(lp, (int, float)) else None
    res.remote_port = int(rp) if isinstance(rp, (int, float)) else None

    end = _get(doc, "end", default={})
    res.bytes_sent = num(_get(end, "sum_sent", "bytes"))
    res.retransmits = num(_get(end, "sum_sent", "retransmits"))
    res.sender_seconds = num(_get(end, "sum_sent", "seconds"))
    res.bytes_received = num(_get(end, "sum_received", "bytes"))
    if res.error and res.bytes_received == 0:
        res.bytes_received = math.nan
    res.mean_rtt_ms = num(_get(end, "streams", 0, "sender", "mean_rtt")) / US_PER_MS
    res.max_snd_cwnd_bytes = num(_get(end, "streams", 0, "sender", "max_snd_cwnd"))

    if _get(doc, "start", "test_start") is None:
        # Interrupted before the test began: iperf3 then reports intervals and totals against
        # an unset start time (seconds since boot), so they carry no timing information.
        res.sender_seconds = math.nan
        return res
    rows = []
    for iv in _get(doc, "intervals", default=[]):
        s = _get(iv, "sum", default={})
        st = _get(iv, "streams", 0, default={})
        rows.append({"t_rel_s": num(_get(s, "end")), "interval_s": num(_get(s, "seconds")),
                     "bytes": num(_get(s, "bytes")),
                     "bits_per_second": num(_get(s, "bits_per_second")),
                     "retransmits": num(_get(s, "retransmits")),
                     "snd_cwnd_bytes": num(_get(st, "snd_cwnd")),
                     "rtt_ms": num(_get(st, "rtt")) / US_PER_MS})
    if rows:
        res.intervals = pd.DataFrame(rows, columns=res.intervals.columns).astype("float64")
    return res


def _first_not_none(*values: Any) -> Any:
    return next(v for v in values if v is not None)


class Iperf3(Capture):
    name = "iperf3"
    raw_files = (CLIENT_FILE,)
    other_files = (SERVER_FILE,)
    tables = {
        "flows": ("run_id", "flow", "cc", "rtt_ms", "start_s", "launched_s", "duration_s",
                  "elapsed_s", "local_port", "server_port", "sender_ip", "bytes_sent",
                  "bytes_received", "retransmits", "mean_rtt_ms", "max_snd_cwnd_bytes", "totals_from"),
        "throughput": ("run_id", "flow", "t_s", "interval_s", "bytes", "bits_per_second",
                       "retransmits", "snd_cwnd_bytes", "rtt_ms"),
    }
    required_columns = {"flows": ("flow", "bytes_received"), "throughput": ("flow", "t_s", "interval_s", "bytes")}
    number_columns = {"flows": ("flow", "bytes_sent", "bytes_received", "retransmits"),
                      "throughput": ("flow", "t_s", "interval_s", "bytes", "retransmits")}

    def results(self, raw: dict[str, str | None], run: RunView) -> dict[int, Iperf3Result]:
        """flow -> what its client output says (flows without one are left out)."""
        return {flow_number(f): parse_iperf3_json(text)
                for f in run.flows if (text := raw.get(client_file(flow_number(f)))) is not None}

    def parse(self, raw: dict[str, str | None], run: RunView) -> dict[str, pd.DataFrame]:
        """flows always (from meta.json when iperf3 said nothing); throughput when any client did."""
        tables = {"flows": self._flows(run)}
        if run.iperf:
            tables["throughput"] = self._throughput(run)
        return tables

    def _flows(self, run: RunView) -> pd.DataFrame:
        import pandas as pd

        rows = []
        for f in run.flows:
            i = flow_number(f)
            r = run.iperf.get(i, Iperf3Result())
            rows.append({"flow": i, "cc": f.cc, "rtt_ms": f.rtt_ms,
                         "start_s": f.start_s, "launched_s": f.launched_s,
                         "duration_s": f.duration_s, "elapsed_s": r.sender_seconds,
                         "local_port": run.ports.get(i),
                         "server_port": f.server_port, "sender_ip": f.sender_ip,
                         "bytes_sent": r.bytes_sent, "bytes_received": r.bytes_received,
                         "retransmits": r.retransmits, "mean_rtt_ms": r.mean_rtt_ms,
                         "max_snd_cwnd_bytes": r.max_snd_cwnd_bytes,
                         # where the byte totals come from: iperf3's summary, or (ingest) the ss samples
                         "totals_from": "iperf3" if math.isfinite(r.bytes_sent) else None})
        flows = self.finish("flows", pd.DataFrame(rows, columns=self.tables["flows"][1:]), run,
                            strings=("cc", "sender_ip", "totals_from"))
        for c in ("local_port", "server_port", "bytes_sent", "bytes_received", "retransmits",
                  "max_snd_cwnd_bytes"):
            flows[c] = pd.to_numeric(flows[c]).astype("Int64")
        for c in ("rtt_ms", "start_s", "launched_s", "duration_s", "elapsed_s", "mean_rtt_ms"):
            flows[c] = pd.to_numeric(flows[c]).astype("float64")
        return flows

    def _throughput(self, run: RunView) -> pd.DataFrame:
        """Interval ends are relative to the client's own start."""
        import pandas as pd

        parts = []
        for f in run.flows:
            i = flow_number(f)
            if i not in run.iperf or run.iperf[i].intervals.empty:
                continue
            launched = _first_not_none(f.launched_s, f.start_s, 0.0)
            iv = run.iperf[i].intervals.copy()
            iv["flow"] = i
            iv["t_s"] = iv.pop("t_rel_s") + float(launched)
            parts.append(iv)
        return self.finish("throughput", pd.concat(parts) if parts else pd.DataFrame(), run)
