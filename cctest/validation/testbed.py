"""The stored testbed table: data/peer/cao2019/original_result_imc_bbr.csv, read and checked.

A cell is (buffer in bytes, rate in Mbit/s, RTT in ms). The file gives the buffer in tc's
kilobytes (`bfifo limit 100kb`: 1024 bytes each), so 100 is 102 400 bytes, the value the suite
sets as `buffer_bytes`. Only the cells up to MAX_RATE_MBPS are compared: the suite runs no more.
"""

from __future__ import annotations

import csv
import io
import math
from pathlib import Path
from typing import NamedTuple

from ..base.errors import BadInput
from ..base.safeload import Refused, decode_utf8, read_bounded

REPO_ROOT = Path(__file__).resolve().parents[2]
TABLE = REPO_ROOT / "data" / "peer" / "cao2019" / "original_result_imc_bbr.csv"
SOURCE = ("Cao et al., \"When to use and when not to use BBR\", IMC 2019, Fig. 5, as published by the "
          "replication of Datta and Fund (IMC 2023), github.com/sdatta97/imcbbrrepro")
TC_KB_BYTES = 1024  # tc's size unit "kb" (iproute2 get_size): the testbed's bfifo limit
MAX_RATE_MBPS = 100  # the suite's cells: the emulator is faithful up to here
COLUMNS = ("bufcap", "bandwidth", "rtt", "goodput_gain")
MAX_TABLE_BYTES = 1 << 20  # the table is 2 kB; a bound, not a size any real table meets


class Cell(NamedTuple):
    buffer_bytes: int
    rate_mbps: float
    rtt_ms: float

    def label(self) -> str:
        return f"{buffer_text(self.buffer_bytes)}, {self.rate_mbps:g} Mbit/s, {self.rtt_ms:g} ms"


def buffer_text(buffer_bytes: int) -> str:
    """102400 -> "100 KB", 10240000 -> "10 MB": the buffer as the paper names it."""
    kb = buffer_bytes / TC_KB_BYTES
    return f"{kb / 1000:g} MB" if kb >= 1000 else f"{kb:g} KB"


def read_table(path: Path | str = TABLE) -> dict[Cell, float]:
    """Cell -> the testbed's goodput gain (%), for the cells up to MAX_RATE_MBPS, in file order."""
    try:
        text = decode_utf8(read_bounded(path, MAX_TABLE_BYTES, "a testbed table"))
    except Refused as error:
        raise BadInput(f"{path}: {error}") from None
    rows = list(csv.DictReader(io.StringIO(text)))
    if not rows or tuple(rows[0].keys()) != COLUMNS:
        raise BadInput(f"{path}: not the testbed table; its columns must be {', '.join(COLUMNS)}")
    table: dict[Cell, float] = {}
    for line, row in enumerate(rows, start=2):
        try:
            values = [float(row[c]) for c in COLUMNS]
        except (TypeError, ValueError):
            raise BadInput(f"{path}: line {line}: {', '.join(COLUMNS)} must be numbers") from None
        if not all(math.isfinite(v) for v in values) or min(values[:3]) <= 0:
            raise BadInput(f"{path}: line {line}: buffer, rate and RTT must be positive, the gain finite")
        bufcap, rate, rtt, gain = values
        if rate <= MAX_RATE_MBPS:
            table[Cell(int(round(bufcap * TC_KB_BYTES)), rate, rtt)] = gain
    if not table:
        raise BadInput(f"{path}: no cell at or below {MAX_RATE_MBPS} Mbit/s")
    return table
