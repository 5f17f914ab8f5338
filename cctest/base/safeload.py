"""Reading files a user or a CI artifact hands us, bounded in time, memory and depth.

One loader for experiments.yaml and for a run directory's scenario.yaml (and the same file rules
for its JSON): only regular files are read (a FIFO would block, /dev/zero never ends, a directory
is no file), never more than a stated number of bytes, and YAML is checked on libyaml's event
stream *before* anything is built: nesting depth, the number of values once every alias is
expanded (a 1 KB "billion laughs" file would otherwise expand to 10**9 values for pydantic and
the matrix code to walk) and aliases to an anchor that is still open (a value containing itself).
Every refusal is a BadInput: one line, exit 2.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from .errors import BadInput

if TYPE_CHECKING:
    from collections.abc import Hashable

MAX_NESTING = 32  # an experiments file is a few levels deep; deeper is a mistake or an attack
MAX_VALUES = 20_000  # values (scalars and collections), aliases expanded: experiments.yaml has 1 259, and
# building 20 000 takes PyYAML ~0.3 s (the budget for an answer is 1 s)
if TYPE_CHECKING:  # either has SafeLoader's interface
    FAST_SAFE_LOADER = yaml.SafeLoader
else:
    FAST_SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml's parser when present


class Refused(BadInput):
    """A file that is not read, or a YAML text that is not built: the message says why (no path;
    the caller prefixes it)."""


def read_bounded(path: str | Path, max_bytes: int, what: str = "the file") -> bytes:
    """The bytes of the regular file at `path`, at most `max_bytes`; Refused otherwise. Opened without
    blocking (a FIFO with no writer would hang a plain open) and checked on the open descriptor."""
    try:
        fd = os.open(path, READ_FLAGS)
    except OSError as error:
        raise Refused(f"cannot read ({error.strerror})") from None
    return read_open(fd, max_bytes, what)


READ_FLAGS = os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | getattr(os, "O_CLOEXEC", 0)


def kind_of(mode: int) -> str:
    """What a file that is no regular file is, in the words of a refusal."""
    return ("a directory" if stat.S_ISDIR(mode) else "a FIFO" if stat.S_ISFIFO(mode)
            else "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode)
            else "a socket" if stat.S_ISSOCK(mode) else "a symbolic link" if stat.S_ISLNK(mode)
            else "something else")


def check_regular(fd: int, max_bytes: int, what: str) -> os.stat_result:
    """The open file's stat when it is a regular file of at most `max_bytes`; Refused otherwise."""
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        raise Refused(f"is {kind_of(info.st_mode)}, not a regular file; {what} is a regular file")
    if info.st_size > max_bytes:
        raise Refused(f"{info.st_size} bytes; {what} is at most {max_bytes}")
    return info


def read_open(fd: int, max_bytes: int, what: str) -> bytes:
    """The bytes behind the descriptor `fd` (closed here), checked by check_regular and read no
    further than `max_bytes`."""
    try:
        check_regular(fd, max_bytes, what)
        chunks, size = [], 0
        while size <= max_bytes:  # the file may grow while read: never past the bound
            chunk = os.read(fd, min(1 << 20, max_bytes + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        if size > max_bytes:
            raise Refused(f"more than {max_bytes} bytes; {what} is at most {max_bytes}")
        return b"".join(chunks)
    except OSError as error:
        raise Refused(f"cannot read ({error.strerror})") from None
    finally:
        os.close(fd)


def check_yaml_events(text: str, max_nesting: int = MAX_NESTING, max_values: int = MAX_VALUES) -> int:
    """Refuse, from the parser's events alone (constant memory per open collection), a text nested
    deeper than `max_nesting`, one of more than `max_values` values once aliases are expanded, and
    an alias to an anchor still open. Each anchor's expanded size and height are remembered, so the
    work is linear in the text however the aliases multiply. Returns the values counted."""
    anchors: dict[str, tuple[int, int]] = {}  # anchor -> (values, height) of its expansion
    stack: list[list] = []  # open collections: [anchor, values, height of the tallest child]
    total = 0

    def add(values: int, height: int, line: int) -> None:
        nonlocal total
        total += values
        if total > max_values:
            raise Refused(f"line {line}: more than {max_values} values (aliases expanded); not an experiments file")
        if len(stack) + height > max_nesting:
            raise Refused(f"line {line}: nested more than {max_nesting} levels deep; not an experiments file")
        if stack:
            stack[-1][1] += values
            stack[-1][2] = max(stack[-1][2], height)

    for event in yaml.parse(text, Loader=FAST_SAFE_LOADER):
        assert event.start_mark is not None  # the parser marks every event
        line = event.start_mark.line + 1
        if isinstance(event, yaml.ScalarEvent):
            if event.anchor:
                anchors[event.anchor] = (1, 0)
            add(1, 0, line)
        elif isinstance(event, yaml.AliasEvent):
            if any(frame[0] == event.anchor for frame in stack):
                raise Refused(f"line {line}: a recursive YAML anchor (a value contains itself)")
            assert event.anchor is not None  # an alias names its anchor
            values, height = anchors.get(event.anchor, (1, 0))  # an unknown anchor: the composer says so
            add(values, height, line)
        elif isinstance(event, (yaml.MappingStartEvent, yaml.SequenceStartEvent)):
            if len(stack) + 1 > max_nesting:
                raise Refused(f"line {line}: nested more than {max_nesting} levels deep; not an experiments file")
            stack.append([event.anchor, 0, 0])
        elif isinstance(event, (yaml.MappingEndEvent, yaml.SequenceEndEvent)):
            anchor, values, height = stack.pop()
            if anchor:
                anchors[anchor] = (values + 1, height + 1)
            add(1, 0, line)  # the collection itself; its children were added as they came
            if stack:
                stack[-1][2] = max(stack[-1][2], height + 1)
    return total


class StrictLoader(FAST_SAFE_LOADER):
    """SafeLoader that refuses what YAML would silently accept: a key given twice (the last would
    win), keys that are not text (YAML 1.1 reads `yes:`, `on:`, `no:` as booleans, `123:` as a
    number), and number forms that read as something else than they show (`020` is octal 16,
    `1:30` is sexagesimal 90)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Hashable, Any]:
        seen: dict = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue  # `<<: *defaults`: the keys given here override the merged ones, as meant
            key = self.construct_object(key_node, deep=True)
            line = key_node.start_mark.line + 1
            if isinstance(key, bool) or key is None or isinstance(key, (int, float)):
                raise Refused(
                    f"line {line}: key {key_node.value!r} reads as {key!r} in YAML, not as text; quote it "
                    f"('{key_node.value}':)")
            if not isinstance(key, str):
                raise Refused(f"line {line}: a key must be text, got a {type(key).__name__}")
            if key in seen:
                raise Refused(f"line {line}: key {key!r} given twice (first on line {seen[key]}); keep one")
            seen[key] = line
        return super().construct_mapping(node, deep=deep)

    def construct_yaml_int(self, node: yaml.ScalarNode) -> int:
        text = node.value.replace("_", "").lstrip("+-")
        if ":" in text or (len(text) > 1 and text.startswith("0") and text[1].isdigit()):
            form = "a sexagesimal (base 60) number" if ":" in text else "an octal number"
            raise Refused(f"line {node.start_mark.line + 1}: {node.value} reads as {form} in YAML "
                          f"({super().construct_yaml_int(node)}); write it without leading zeros or colons, "
                          "or quote it as text")
        try:
            return super().construct_yaml_int(node)
        except ValueError:  # more digits than Python converts
            raise Refused(f"line {node.start_mark.line + 1}: a number of {len(node.value)} digits; "
                          "not a value any key takes") from None

    def construct_yaml_float(self, node: yaml.ScalarNode) -> float:
        if ":" in node.value:
            raise Refused(f"line {node.start_mark.line + 1}: {node.value} reads as a sexagesimal (base 60) "
                          f"number in YAML ({super().construct_yaml_float(node)}); write it as a plain number")
        return super().construct_yaml_float(node)


StrictLoader.add_constructor("tag:yaml.org,2002:int", StrictLoader.construct_yaml_int)
StrictLoader.add_constructor("tag:yaml.org,2002:float", StrictLoader.construct_yaml_float)


def load_yaml(text: str) -> Any:
    """The document in `text`, built only after check_yaml_events; Refused with a one-line reason
    (a line number, no path) for anything else, YAML syntax errors included."""
    return _load_counted(text, MAX_VALUES)[0]


def _load_counted(text: str, max_values: int) -> tuple[Any, int]:
    try:
        values = check_yaml_events(text, max_values=max_values)
        return yaml.load(text, Loader=StrictLoader), values
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f"line {mark.line + 1}: " if mark else ""
        raise Refused(f"{where}not valid YAML ({getattr(error, 'problem', None) or error})") from None
    except ValueError as error:  # e.g. an integer of more than 4300 digits
        raise Refused(f"a value cannot be read ({error})") from None
    except RecursionError:
        raise Refused(f"nested more than {MAX_NESTING} levels deep; not an experiments file") from None


def decode_utf8(data: bytes) -> str:
    try:
        return data.decode("utf-8-sig")  # UTF-8 only (a UTF-8 byte-order mark is fine)
    except UnicodeDecodeError as error:
        raise Refused(f"not UTF-8 text (byte 0x{data[error.start]:02x} at offset {error.start}); "
                      "save it as UTF-8") from None


def load_yaml_file(path: str | Path, max_bytes: int, what: str = "the file") -> Any:
    """read_bounded + decode_utf8 + load_yaml, the refusals prefixed with the path."""
    try:
        return load_yaml(decode_utf8(read_bounded(path, max_bytes, what)))
    except Refused as error:
        raise Refused(f"{path}: {error}") from None


class Budget:
    """One allowance of bytes and YAML values for a set of files read as one input (an experiments
    file and the suite files it includes): splitting a file into many buys no more of either."""

    def __init__(self, max_bytes: int, max_values: int = MAX_VALUES) -> None:
        self.bytes_left, self.values_left = max_bytes, max_values

    def load_file(self, path: str | Path, what: str, shown: str | None = None) -> Any:
        """load_yaml_file within what is left; the refusals prefixed with `shown` (default: the path)."""
        try:
            data = read_bounded(path, self.bytes_left, what)
            document, values = _load_counted(decode_utf8(data), self.values_left)
        except Refused as error:
            raise Refused(f"{shown or path}: {error}") from None
        self.bytes_left -= len(data)
        self.values_left -= values
        return document
