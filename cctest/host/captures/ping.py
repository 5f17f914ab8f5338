"""ping: base-RTT probes from each sender to its receiver, before the flows start ->
raw/ping-<flow>.txt -> the ping table."""

from __future__ import annotations

import re
import subprocess
from typing import TYPE_CHECKING

from .base import BASE_RTT, Capture, RunView, StartContext, Undo, flow_number

if TYPE_CHECKING:  # imported where used: the guest's run path starts without pandas
    import pandas as pd

PING_COUNT = 10
PING_INTERVAL_S = 0.2
PING_TIMEOUT_S = 60
PING_FILE = "ping-<flow>.txt"

_PING_RE = re.compile(r"icmp_seq=(\d+)\b.*?\btime[=<]\s*([0-9.]+)\s*ms")


def parse_ping(text: str) -> pd.DataFrame:
    """ping output -> one row per echo reply: seq (int), rtt_ms (float)."""
    import pandas as pd

    rows = [{"seq": int(m.group(1)), "rtt_ms": float(m.group(2))}
            for m in map(_PING_RE.search, text.splitlines()) if m]
    return pd.DataFrame(rows, columns=["seq", "rtt_ms"]).astype({"seq": "int64",
                                                                 "rtt_ms": "float64"})


class Ping(Capture):
    name = "ping"
    raw_files = (PING_FILE,)
    tables = {"ping": ("run_id", "flow", "seq", "rtt_ms")}
    required_columns = {"ping": ("flow", "rtt_ms")}
    number_columns = {"ping": ("flow", "rtt_ms")}
    starts = BASE_RTT

    def start(self, ctx: StartContext, undo: Undo) -> None:
        """All flows' pings at once, waited for: they are over before the flows begin."""
        procs = []
        for flow in ctx.spec.flows:
            out = open(ctx.raw / PING_FILE.replace("<flow>", str(flow.index)), "w")
            cmd = ["ping", "-n", "-c", str(PING_COUNT), "-i", f"{PING_INTERVAL_S}", flow.receiver_ip]
            procs.append(ctx.net.host(flow.sender).popen(cmd, stdout=out, stderr=subprocess.STDOUT))
        for proc in procs:
            proc.wait(timeout=PING_TIMEOUT_S)

    def parse(self, raw: dict[str, str | None], run: RunView) -> dict[str, pd.DataFrame]:
        import pandas as pd

        parts = []
        for f in run.flows:
            text = raw.get(PING_FILE.replace("<flow>", str(flow_number(f))))
            if text is not None:
                p = parse_ping(text)
                p["flow"] = flow_number(f)
                parts.append(p)
        return {"ping": self.finish("ping", pd.concat(parts), run)} if parts else {}
