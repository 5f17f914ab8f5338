"""The congestion control's internal state over time: one subplot per traced key of each module's
`state` tracepoint (the cc_state table), in readable units, enumerations labelled by name.

A module's enumerations are read from its sources (projectccs.traced_enums: the enums marked
`/* tracepoint field "NAME" */`), so a new variant's modes and phases are labelled without a list here.
"""

from __future__ import annotations

from collections.abc import Callable

import pandas as pd

from ..kernel.projectccs import traced_enums
from .figure import DFig, Fig, layout, lines

# cc_state keys carry their unit in their name (bits/s, µs) or are packets; shown in readable units.
PACKET_KEYS = {"cwnd", "upper_cwnd", "inflight_hi", "inflight_lo", "min_win", "max_win"}


def state_enum(cc: str, key: str) -> dict[int, str] | None:
    """Value -> name of an enumerated state key of module `cc` (its mode, a variant's phase), else None."""
    return traced_enums(cc).get(key)


def state_unit(key: str) -> tuple[str, float, str]:
    """(label, scale, unit) of a cc_state key: bw_bps -> ('bw', 1e-6, 'Mbit/s'), min_rtt_us -> ms."""
    if key.endswith("_bps"):
        return key[:-4], 1e-6, "Mbit/s"
    if key.endswith("_us"):
        return key[:-3], 1e-3, "ms"
    if key in PACKET_KEYS:
        return key, 1.0, "packets"
    return key, 1.0, ""


def _state_title(cc: str, key: str) -> str:
    label, _, unit = state_unit(key)
    return f"{cc}: {label}" + (f" ({unit})" if unit else "")


def cc_state_figure(st: pd.DataFrame, names: dict, max_points: int, color: Callable[[int], str]) -> Fig:
    """The cc_state table as stacked subplots sharing the time axis; `color`: flow -> its colour."""
    st = st.assign(cc=st["cc"].astype(object), key=st["key"].astype(object))
    keys = [tuple(k) for k in st[["cc", "key"]].drop_duplicates().itertuples(index=False)]
    by_key = dict(iter(st.groupby(["cc", "key"], sort=False)))
    n = len(keys)
    fig = DFig(rows=n, vertical_spacing=min(0.06, 0.3 / max(n, 1)),
               subplot_titles=[_state_title(cc, k) for cc, k in keys])
    shown = set()
    for i, (cc, key) in enumerate(keys, start=1):
        d = by_key[(cc, key)]
        enum = state_enum(cc, key)
        scale = 1.0 if enum else state_unit(key)[1]
        for fl, g in d.groupby("flow"):
            g = g.sort_values("t_s")
            for t in lines([dict(x=g["t_s"].to_numpy(), y=g["value"].to_numpy() * scale,
                                 name=names.get(fl, f"flow {fl}"), color=color(fl),
                                 legendgroup=str(fl), showlegend=fl not in shown)],
                           max_points, shape="hv" if enum else None):
                fig.add_trace(t, row=i, col=1)
            shown.add(fl)
        if enum:
            fig.update_yaxes(tickvals=list(enum), ticktext=list(enum.values()),
                             range=[min(enum) - 0.3, max(enum) + 0.3], row=i, col=1)
    layout(fig, xtitle="", height=max(260, 170 * n))
    fig.update_xaxes(title_text="time (s)", row=n, col=1)
    enums = "; ".join(f"{cc} {k}: " + ", ".join(f"{v}={lab}" for v, lab in e.items())
                      for cc, k in keys for e in [state_enum(cc, k)] if e)
    return Fig("Congestion-control internal state (module tracepoint)", fig,
               "One subplot per state key, one line per flow; rates in Mbit/s, times in ms, gains as "
               "multipliers." + (f" Enumerations: {enums}." if enums else ""),
               "cc_state")

