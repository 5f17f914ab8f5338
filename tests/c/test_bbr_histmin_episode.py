"""bbr_histmin's ProbeRTT episodes (modules/bbr1/bbr_histmin_episode.h), compiled on its own and driven
with the calls the module's hooks make: the same header bbr_histmin.c includes.

RTprop rises only when K (3) consecutive ProbeRTT episodes agree on a higher minimum (or one is
drastically higher, 10x). An episode opens when ProbeRTT begins; its minimum is over every RTT sample
of it, whether or not the ACK on which the RTprop filter expired carried one (that ACK reaches the
expiry hook only with a fresh, undelayed sample above RTprop).
"""

from __future__ import annotations

import random
import subprocess
from itertools import pairwise
from pathlib import Path

import pytest

from tests.c.build import build_c_harness

RTPROP = 10_000  # us
K, TOLERANCE_PCT, DRASTIC_X1000 = 3, 10, 10_000  # the module's defaults


@pytest.fixture(scope="module")
def episode_binary(tmp_path_factory) -> Path:
    return build_c_harness(tmp_path_factory, "bbr_histmin_episode_test", "histmin episode")


def drive(binary: Path, ops: list[str]) -> list[tuple[int, int, int, int]]:
    """(RTprop, streak, raised, episode minimum) after each operation."""
    out = subprocess.run([str(binary), str(RTPROP)], input="\n".join(ops) + "\n", capture_output=True,
                         text=True, check=True)
    return [tuple(map(int, line.split())) for line in out.stdout.splitlines()]


def episode(*samples: int, expiry: int | None = None) -> list[str]:
    """One ProbeRTT: the expiry ACK (its sample, if it reached the expiry hook), then the ACKs in
    ProbeRTT (0: an ACK without an RTT sample)."""
    return ([f"x {expiry}"] if expiry else []) + ["b"] + [f"s {s}" for s in samples] + ["e"]


def test_an_episode_whose_expiry_ack_had_no_rtt_sample_is_still_judged(episode_binary):
    # three episodes at 15-16 ms over an RTprop of 10 ms; no expiry ACK carried a sample above RTprop
    first = episode(0, 15_000, 14_000)
    trace = drive(episode_binary, first + episode(16_000) + episode(0, 14_500, 0))
    assert trace[len(first) - 1][:3] == (RTPROP, 1, 0)  # the first one counted
    assert trace[-1][:3] == (14_000, 0, 1)  # RTprop rose to the lowest of the three minima


def test_an_expiry_without_probe_rtt_leaves_no_stale_minimum_for_the_next_episode(episode_binary):
    # an expiry in an idle restart (no ProbeRTT) on a sample within tolerance of RTprop; the next
    # episode measures 20 ms: it is higher, not "agreeing" by the idle restart's 10.5 ms
    ops = ["x 10500"] + episode(20_000)
    trace = drive(episode_binary, ops)
    assert trace[0] == (RTPROP, 0, 0, 0)
    assert trace[-2][3] == 20_000  # the episode's minimum is its own sample
    assert trace[-1][:3] == (RTPROP, 1, 0)


def test_an_episode_with_no_sample_neither_counts_nor_ends_a_streak(episode_binary):
    ops = episode(15_000) + episode(15_000) + episode(0, 0) + episode()
    trace = drive(episode_binary, ops)
    assert trace[-1][:3] == (RTPROP, 2, 0)
    trace = drive(episode_binary, ops + episode(15_000))
    assert trace[-1][:3] == (15_000, 0, 1)


def test_k_higher_episodes_raise_rtprop_to_the_lowest_of_their_minima(episode_binary):
    ops = episode(18_000, expiry=19_000) + episode(13_000, expiry=17_000) + episode(16_000, expiry=16_500)
    trace = drive(episode_binary, ops)
    assert all(t[0] == RTPROP for t in trace[:-1])  # the expiry keeps RTprop
    assert trace[-1][:3] == (13_000, 0, 1)


def test_an_episode_within_tolerance_ends_the_streak(episode_binary):
    ops = episode(15_000) + episode(15_000) + episode(10_900) + episode(15_000)
    assert drive(episode_binary, ops)[-1][:3] == (RTPROP, 1, 0)


def test_a_drastically_higher_episode_raises_rtprop_at_once(episode_binary):
    ops = episode(15_000) + episode(100_000)
    assert drive(episode_binary, ops)[-1][:3] == (100_000, 0, 1)


def test_a_lower_sample_ends_the_streak_and_the_episode(episode_binary):
    ops = episode(15_000) + episode(15_000) + ["b", "s 16000", "l 9000", "s 16000", "e"]
    trace = drive(episode_binary, ops)
    assert trace[-3][:4] == (9_000, 0, 0, 0)
    assert trace[-1][:3] == (9_000, 0, 0)


def reference(events: list[tuple[str, int]], rtprop: int) -> tuple[int, int, int]:
    """The rule from ALGORITHMS.md and bbr_histmin.c's header, episode by episode: (RTprop, streak,
    raised) at the end. An episode's minimum is its lowest sample; one without samples, or cut short
    by a sample below RTprop, is not judged."""
    streak_mins: list[int] = []
    raised, samples, open_ = 0, [], False
    for op, value in events:
        if op == "l" and value < rtprop:
            rtprop, streak_mins, open_ = value, [], False
        elif op == "b":
            samples, open_ = [], True
        elif op == "s" and open_ and value > 0:
            samples.append(value)
        elif op == "e" and open_ and samples:
            low, open_ = min(samples), False
            if low * 1000 >= rtprop * DRASTIC_X1000:
                rtprop, streak_mins, raised = low, [], raised + 1
            elif low * 100 > rtprop * (100 + TOLERANCE_PCT):
                streak_mins.append(low)
                if len(streak_mins) >= K:
                    rtprop, streak_mins, raised = min(streak_mins), [], raised + 1
            else:
                streak_mins = []
        elif op == "e":
            open_ = False
    return rtprop, len(streak_mins), raised


def random_events(rng: random.Random, episodes: int) -> list[tuple[str, int]]:
    """ProbeRTT episodes at a path RTT that moves between levels (a queue that stands or drains, a
    route change), some with an expiry sample, some idle restarts (an expiry without ProbeRTT), ACKs
    without samples, now and then a sample below RTprop."""
    events, base = [], RTPROP
    for _ in range(episodes):
        if rng.random() < 0.4:
            base = int(RTPROP * rng.choice([0.7, 0.95, 1.05, 1.3, 1.6, 2.5, 15]))
        if rng.random() < 0.3:
            events.append(("x", base + rng.randrange(1, 3000)))
        if rng.random() < 0.15:
            continue  # an idle restart: the filter expired without a ProbeRTT
        events.append(("b", 0))
        for _ in range(rng.randrange(0, 6)):
            kind = rng.random()
            events.append(("l" if kind < 0.05 else "s", 0 if kind > 0.8 else base + rng.randrange(0, 4000)))
        events.append(("e", 0))
    return events


@pytest.mark.parametrize("seed", range(8))
def test_rtprop_follows_the_episode_rule_over_random_histories(episode_binary, seed):
    events = random_events(random.Random(seed), 300)
    ops = [op if op in "be" else f"{op} {value}" for op, value in events]
    trace = drive(episode_binary, ops)
    assert trace[-1][:3] == reference(events, RTPROP)
    assert sum(t[2] > p[2] for p, t in pairwise(trace)) >= 2  # RTprop did rise, more than once
    # RTprop never rises on an expiry or on a sample: only when an episode ends
    rises = [i for i in range(1, len(ops)) if trace[i][0] > trace[i - 1][0]]
    assert rises and all(ops[i] == "e" for i in rises)
