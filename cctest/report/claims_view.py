"""The report's Claims table and claims.json: what the runs say of each scenario's `expect:`."""

from __future__ import annotations

import pandas as pd

from ..analysis.claims import Verdict, counts, results, status_counts
from .html import Page, esc, table

ROW_CLASS = {"fail": "reg", "no data": "reg", "inconclusive": "", "pass": "", "not run": ""}


def claims_section(page: Page, verdicts: list[Verdict], notes: list[str]) -> None:
    page.h2("Claims", "claims")
    n = counts(verdicts)
    status = {id(r.expectation): r for r in results(verdicts)}  # each claim's status over its points
    st = status_counts(list(status.values()))
    gate = any(r.gates for r in status.values())
    page.add(f"<p class='{'bad' if gate else 'ok'}'>Claims: {', '.join(f'{k} {s}' for s, k in st.items() if k)}. "
             f"Points: {n['pass']} pass, {n['fail']} fail, {n['inconclusive']} inconclusive, "
             f"{n['no data']} without data.</p>"
             "<p class='note'>Each claim is judged per matrix point on the margin by which it holds in each "
             "repetition: pass when the 95 % Student-t interval of the margins lies on the holding side, fail "
             "when it lies on the other, inconclusive when it straddles the bound; one repetition is judged by "
             "its value; runs whose health failed are left out and make their point inconclusive. A claim "
             "naming controls that run in different points is judged across them. Its status: a known "
             "failure (known-fail) does not fail the gate, a known failure that passes (unexpected-pass) "
             "does.</p>")
    if notes:
        page.add("<ul class='notes'>" + "".join(f"<li>{esc(x)}</li>" for x in notes) + "</ul>")
    rows = pd.DataFrame([{"scenario": v.expectation.scenario, "claim": v.expectation.claim.text,
                          "point": v.point, "source": v.expectation.source, "measured": v.measured(),
                          "verdict": v.verdict, "status": status[id(v.expectation)].status,
                          "note": (f"known ({v.expectation.known.triage}): {v.expectation.known.reason}. "
                                   if v.expectation.known else "") + (v.reason + " " if v.reason else "")
                          + v.expectation.note} for v in verdicts])
    page.add(table(rows, left=set(rows.columns),
                   cls_rows=[ROW_CLASS[v.verdict] if status[id(v.expectation)].gates else "" for v in verdicts]))
