#!/usr/bin/env python3
"""Apply acw-calib-bdp's rule (experiments.yaml, the comment above the scenario) to a judged result.

Usage: cctest check records/paper-001/acw-calib-bdp -o claims.json
       python3 scripts/acw-calibration-rule.py claims.json

Each reading of the paper's "BDP" scores one per claim that passes at its own point ("1 BDP" for
Fig. 7e, Fig. 10 and Sec. 5.3, "5 BDP" for Fig. 5a); most wins decide, a tie goes to the smaller sum
of |ln(our mean / the paper's value)| over the four claims. The rule was fixed before the runs; this
script only does its arithmetic, so that the choice can be repeated from the records.
"""

from __future__ import annotations

import json
import math
import sys

# reading -> (its "1 BDP" point, its "5 BDP" point), in units of the 10 ms path's BDP
READINGS = {"the 10 ms path": (1, 5), "the mean RTT": (3, 15), "the long flow": (5, 25)}
# claim source prefix -> (the point it is read at: 0 = "1 BDP", 1 = "5 BDP"; the metric; the paper's value)
CLAIMS = {
    "001 Fig. 5a": (1, "short_rtt_share", 0.095),
    "001 Sec. 5.2 text on Fig. 7e": (0, "short_rtt_share", 0.2),
    "001 Fig. 10a": (0, "qdelay(bbr1)", 25.0),
    "001 Sec. 5.3": (0, "retransmits(bbr1)", 2992.0),
}


def point_of(label: str) -> float:
    return float(label.rsplit("buffer_bdp=", 1)[1].rstrip("]"))


def main(path: str) -> int:
    judged = json.load(open(path))["claims"]
    found: dict[tuple[str, float], tuple[str, float]] = {}
    for entry in judged:
        for source, (_, metric, _) in CLAIMS.items():
            if entry["source"].startswith(source):
                found[source, point_of(entry["point"])] = (entry["verdict"], entry["values"][metric]["mean"])
    scores = {}
    for reading, points in READINGS.items():
        wins, distance = 0, 0.0
        for source, (which, metric, paper) in CLAIMS.items():
            key = (source, float(points[which]))
            if key not in found:
                print(f"{reading}: {source} at {points[which]} has not run", file=sys.stderr)
                return 2
            verdict, mean = found[key]
            wins += verdict == "pass"
            distance += abs(math.log(mean / paper))
            print(f"{reading:15} {source:30} at {points[which]:>2}: {verdict:5} {metric} = {mean:.4g} (paper {paper:g})")
        scores[reading] = (wins, distance)
        print(f"{reading:15} wins {wins}, sum |ln(ours/paper)| = {distance:.2f}\n")
    chosen = min(scores, key=lambda r: (-scores[r][0], scores[r][1]))
    if scores[chosen][0] == 0:
        print("no reading passes any claim: the sum alone decides, and the calibration failed")
    print(f"chosen: {chosen}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
