"""meta.json is read through its model: outside cctest/model/record.py, the door that turns the file's
JSON object into a RunRecord (and reads the few fields a lenient reader takes as written), no code
reads a record by string key."""

from __future__ import annotations

import re

from tests import REPO

DOOR = REPO / "cctest" / "model" / "record.py"
STRING_KEY_READ = re.compile(r"\bmeta(\[|\.get\()")


def test_no_string_key_read_of_a_record_outside_its_module():
    found = [f"{path.relative_to(REPO)}:{number}: {line.strip()}"
             for path in sorted((REPO / "cctest").rglob("*.py")) if path != DOOR
             for number, line in enumerate(path.read_text().splitlines(), 1) if STRING_KEY_READ.search(line)]
    assert not found, "read the RunRecord's fields instead:\n" + "\n".join(found)
