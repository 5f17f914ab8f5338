"""Which pacing rate bbr3 sets (modules/bbr3/bbr3_pacing.h), compiled on its own and driven call by
call: the same header bbr3.c includes, on every ACK (SetPacingRateWithGain) and on the restart from
idle in ProbeBW. Without a bandwidth estimate (bw = 0) the rate in force stays: the rate bw = 0 gives
is 0, and a pacing rate of 0 would stall the flow."""

import random
import subprocess
from pathlib import Path

import pytest

from tests.c.build import build_c_harness

MSS = 1448
BW_SCALE = 24  # bw in packets per us << 24, as the module keeps it


@pytest.fixture(scope="module")
def pacing_binary(tmp_path_factory) -> Path:
    return build_c_harness(tmp_path_factory, "bbr3_pacing_test", "pacing")


def rate_of(bw: int, gain: float = 1.0) -> int:
    """bytes/s that bw x gain gives with bbr3's 1 % pacing margin (bbr3_rate_bytes_per_sec)."""
    return int(bw * MSS * gain * 990_000) >> BW_SCALE


def drive(binary: Path, calls: list[tuple[str, int, int, int, bool]]) -> list[int]:
    lines = [f"{op} {bw} {rate} {in_force} {int(full)}" for op, bw, rate, in_force, full in calls]
    out = subprocess.run([str(binary)], input="\n".join(lines) + "\n", capture_output=True, text=True, check=True)
    return [int(x) for x in out.stdout.split()]


def test_an_idle_restart_with_no_bandwidth_estimate_never_paces_at_0(pacing_binary):
    # bw_lo cut to 0 by lossy rounds without samples: bw = 0, whose rate is 0
    assert drive(pacing_binary, [("i", 0, rate_of(0), 1_250_000, True)]) == [1_250_000]


def test_an_idle_restart_paces_at_the_estimated_bandwidth(pacing_binary):
    bw = 2_000_000  # about 170 Mbit/s
    assert drive(pacing_binary, [("i", bw, rate_of(bw), 50_000_000, True)]) == [rate_of(bw)]


def test_on_an_ack_no_bandwidth_estimate_keeps_the_rate_in_force(pacing_binary):
    assert drive(pacing_binary, [("g", 0, 0, 900_000, True), ("g", 0, 0, 900_000, False)]) == [900_000] * 2


def test_until_the_pipe_is_full_the_rate_only_rises(pacing_binary):
    bw = 1_000_000
    calls = [("g", bw, rate_of(bw, 2.77), 10**9, False), ("g", bw, rate_of(bw, 2.77), 1000, False),
             ("g", bw, rate_of(bw, 0.9), 10**9, True)]
    assert drive(pacing_binary, calls) == [10**9, rate_of(bw, 2.77), rate_of(bw, 0.9)]


def test_a_flow_that_paces_never_gets_a_rate_of_0(pacing_binary):
    # random calls on both paths, a third of them without an estimate; each starts from the rate the
    # previous one set, as the socket's rate does
    rng = random.Random(4)
    in_force, results = 125_000, []
    for _ in range(300):
        bw = 0 if rng.random() < 0.33 else rng.randrange(1, 2**28)
        call = (rng.choice("gi"), bw, rate_of(bw, rng.choice([0.9, 1.0, 1.25, 2.77])), in_force,
                rng.random() < 0.8)
        (in_force,) = drive(pacing_binary, [call])
        results.append((call, in_force))
    assert all(rate > 0 for _, rate in results)
    assert sum(call[1] == 0 for call, _ in results) > 50  # the no-estimate case was exercised
    # with an estimate and the pipe full, the rate is the model's
    assert all(rate == call[2] for call, rate in results if call[1] and call[4])
