"""Modest BBR's window search (modules/bbr1/bbr_modest_search.h), compiled on its own and driven by a
packet-level flow whose window is the search's cap: the same header bbr_modest.c includes.

Which losses judge the search: only that of a packet sent since the last mark (a new cap, or the
start of ProbeBW), for a search step and for the entry into a search alike. Losses of packets sent
under the last step's cap reach the sender after that step was taken; counting them at entry started
a new search from the cap they had already reduced.
"""

from __future__ import annotations

import random
import subprocess
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.c.build import build_c_harness

U32 = 2**32
TARGET = 40  # BBR's cwnd target, packets
WMIN = 0.75  # the module's default Wmin
NONE, SEARCH, LINEAR = 0, 1, 2


@pytest.fixture(scope="module")
def search_binary(tmp_path_factory) -> Path:
    return build_c_harness(tmp_path_factory, "bbr_modest_search_test", "Modest search")


@dataclass(frozen=True)
class State:
    phase: int
    cap: int
    min_win: int
    max_win: int
    last_cwnd: int


class Search:
    """The harness as a process answering one line per operation."""

    def __init__(self, binary: Path):
        self.proc = subprocess.Popen([str(binary)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def send(self, line: str) -> State:
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()
        return State(*map(int, self.proc.stdout.readline().split()))

    def close(self) -> None:
        self.proc.stdin.close()
        assert self.proc.wait() == 0


@dataclass
class Step:
    """One ACK as the flow saw it, and the search's state after it."""

    ack: int
    snd_nxt: int
    marked_lost: list[int]  # sequence numbers this ACK marked lost
    before: State
    after: State

    @property
    def moved(self) -> bool:
        """The ACK entered a search or took a search step: a new cap, a new mark."""
        entered = self.after.phase == SEARCH and self.before.phase != SEARCH
        stepped = (self.after.min_win, self.after.max_win) != (self.before.min_win, self.before.max_win)
        return entered or stepped


@dataclass
class Flow:
    """A sender over a FIFO path, sequence numbers and counters in packets from `start` (u32 wrap).
    One ACK per delivered packet; a dropped packet is marked lost when a packet sent 3 after it is
    ACKed (SACK), then retransmitted at once (the retransmission arrives). Its window: BBR's target,
    or while the search caps it, the cap (never below Wmin x target)."""

    search: Search
    drop: object  # drop(flow, seq) -> bool, asked once per new packet
    start: int = 0
    path: deque = field(default_factory=deque)  # (seq, P.delivered, dropped)
    unacked: set = field(default_factory=set)
    dropped: list = field(default_factory=list)  # dropped, not yet marked lost
    retransmit: deque = field(default_factory=deque)
    state: State = State(NONE, 0, 0, 0, 0)

    def __post_init__(self):
        self.snd_nxt = self.delivered = self.next_round = self.start
        self.search.send(f"t {TARGET}")
        self.search.send(f"p {self.delivered} {self.snd_nxt}")

    def cwnd(self) -> int:
        if self.state.phase == NONE:
            return TARGET
        return min(TARGET, max(self.state.cap, int(TARGET * WMIN)))  # bbr_modest.c's modest_cwnd_cap

    def fill(self) -> None:
        while len(self.path) < self.cwnd():
            if self.retransmit:
                self.path.append((self.retransmit.popleft(), self.delivered, False))
                continue
            seq = self.snd_nxt
            self.path.append((seq, self.delivered, bool(self.drop(self, seq))))
            self.unacked.add(seq)
            self.snd_nxt = (seq + 1) % U32

    def offset(self, seq: int) -> int:
        return (seq - self.start) % U32

    def ack(self) -> Step:
        """Deliver the path's next packet (dropping the dropped ones on the way) and ACK it."""
        self.fill()
        seq, p_delivered, dropped = self.path.popleft()
        while dropped:
            self.dropped.append(seq)
            seq, p_delivered, dropped = self.path.popleft()
        self.delivered = (self.delivered + 1) % U32
        self.unacked.discard(seq)
        marked = [s for s in self.dropped if self.offset(s) + 3 <= self.offset(seq)]
        self.dropped = [s for s in self.dropped if s not in marked]
        self.retransmit.extend(marked)
        round_start = (p_delivered - self.next_round) % U32 < U32 // 2  # !before(P.delivered, next_round)
        if round_start:
            self.next_round = self.delivered
        snd_una = min(self.unacked, key=self.offset) if self.unacked else self.snd_nxt
        before = self.state
        self.state = self.search.send(f"a {int(round_start)} {len(marked)} 1 {p_delivered} {self.delivered} "
                                      f"{snd_una} {self.snd_nxt} {TARGET}")
        return Step(seq, self.snd_nxt, marked, before, self.state)


def run(binary: Path, drop, acks: int, start: int = 0) -> tuple[Flow, list[Step]]:
    search = Search(binary)
    flow = Flow(search, drop, start)
    steps = [flow.ack() for _ in range(acks)]
    search.close()
    return flow, steps


def unjustified_entries(flow: Flow, steps: list[Step]) -> list[int]:
    """ACKs that entered a search although no packet sent since the last mark had been marked lost
    since it: the truth, from the flow's own sequence numbers."""
    mark_seq, qualifying, bad = flow.start, False, []
    for i, s in enumerate(steps):
        qualifying |= any(flow.offset(seq) >= flow.offset(mark_seq) for seq in s.marked_lost)
        if s.after.phase == SEARCH and s.before.phase != SEARCH and not qualifying:
            bad.append(i)
        if s.moved:
            mark_seq, qualifying = s.snd_nxt, False
    return bad


def searching_loss(first: int, every: int):
    """Drops packet `first` (which starts a search), then every `every`-th packet sent while a search
    step is in force; none once the search is over."""
    def drop(flow: Flow, seq: int) -> bool:
        n = flow.offset(seq)
        return n == first or (flow.state.phase == SEARCH and n % every == 0)
    return drop


def test_a_loss_of_a_packet_sent_under_the_last_steps_cap_does_not_start_a_new_search(search_binary):
    flow, steps = run(search_binary, searching_loss(first=200, every=32), 1500)
    phases = [s.after.phase for s in steps]
    searches = [i for i, s in enumerate(steps) if s.after.phase == SEARCH and s.before.phase != SEARCH]
    assert len(searches) == 1, f"searches entered at ACKs {searches}"
    end = phases.index(LINEAR)
    last = steps[end]
    # the search ended on a lossy step (max_win shrank), and losses of packets sent under that
    # step's cap were only marked after it: the case in which a new search used to start
    assert last.after.max_win < last.before.max_win
    assert any(flow.offset(seq) < flow.offset(last.snd_nxt) for s in steps[end + 1:] for seq in s.marked_lost)
    assert phases[-1] == NONE and steps[-1].after.cap == TARGET


def test_a_search_starts_on_the_loss_of_a_packet_sent_in_probe_bw(search_binary):
    flow, steps = run(search_binary, lambda flow, seq: flow.offset(seq) == 120, 400)
    first = next(i for i, s in enumerate(steps) if s.after.phase == SEARCH)
    assert any(120 in s.marked_lost for s in steps[:first])
    # anchored on BBR's target: last_cwnd = 40, min_win = 30, max_win = cap = 35
    assert steps[first].after == State(SEARCH, 35, 30, 35, TARGET)


def test_without_loss_there_is_no_search(search_binary):
    _, steps = run(search_binary, lambda flow, seq: False, 600)
    assert {s.after.phase for s in steps} == {NONE}


@pytest.mark.parametrize("seed", range(6))
def test_every_search_follows_a_loss_of_a_packet_sent_since_the_last_cap_change(search_binary, seed):
    # random loss at 1-4 %, counters from anywhere in u32 (wrap-around included)
    rng = random.Random(seed)
    rate, start = rng.uniform(0.01, 0.04), rng.choice([0, rng.randrange(U32), U32 - 1000])
    flow, steps = run(search_binary, lambda flow, seq: rng.random() < rate, 4000, start)
    entries = sum(s.after.phase == SEARCH and s.before.phase != SEARCH for s in steps)
    assert entries >= 3  # the property is exercised
    assert unjustified_entries(flow, steps) == []
    # every search is anchored on BBR's target, not on the capped window: no ratchet downwards
    held = [s.after for s in steps if s.after.phase != NONE]
    assert all(h.last_cwnd == TARGET and h.min_win >= TARGET * WMIN and h.cap <= TARGET for h in held)
