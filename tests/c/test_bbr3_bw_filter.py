"""bbr3's max_bw filter (modules/bbr3/bbr3_bw_filter.h), compiled on its own and driven step by step:
the same header the module includes, so what passes here is what the kernel runs."""

import random
import subprocess
from pathlib import Path

import pytest

from tests.c.build import build_c_harness


@pytest.fixture(scope="module")
def filter_binary(tmp_path_factory) -> Path:
    return build_c_harness(tmp_path_factory, "bbr3_bw_filter_test", "filter")


def drive(binary: Path, ops: list[str]) -> list[int]:
    out = subprocess.run([str(binary)], input="\n".join(ops) + "\n", capture_output=True, text=True, check=True)
    return [int(line) for line in out.stdout.split()]


def test_a_cycle_without_samples_keeps_the_estimate(filter_binary):
    # A ProbeBW cycle ends with its slot empty (its round-start ACK carried no rate
    # sample, the rest were app-limited); advancing used to shift the empty slot in: max_bw = 0.
    trace = drive(filter_binary, ["u 100", "a", "a", "a"])
    assert trace == [100, 100, 100, 100]


def test_the_window_spans_two_cycles(filter_binary):
    # the draft's two-cycle window: a sample ages out after the second advance past it
    assert drive(filter_binary, ["u 100", "a", "u 60", "a", "u 50", "a"]) == [100, 100, 100, 60, 60, 50]


def test_once_measured_max_bw_never_returns_to_zero(filter_binary):
    # random cycles of samples and advances, advances in runs (ProbeRTT, app-limited stretches)
    rng = random.Random(12)
    ops = ["u 1"] + [rng.choice(["a", "a", f"u {rng.randint(1, 2**32 - 1)}"]) for _ in range(2000)]
    trace = drive(filter_binary, ops)
    assert min(trace) > 0
    # and the estimate is always the largest sample since the second-to-last non-empty advance
    assert trace[-1] == max(int(op[2:]) for op in ops[last_two_cycles_start(ops):] if op.startswith("u"))


def last_two_cycles_start(ops: list[str]) -> int:
    """Index where the window's older slot began: after the second-to-last advance that had a sample before it."""
    effective, filled = [], False
    for i, op in enumerate(ops):
        if op.startswith("u"):
            filled = True
        elif filled:
            effective.append(i)
            filled = False
    return effective[-2] + 1 if len(effective) >= 2 else 0
