"""Where the external tools a run drives are found."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path


def which(tool: str) -> str | None:
    # The venv's bin (where pip puts vng) may not be on PATH when cctest is called by its full path.
    places = (f"/usr/sbin/{tool}", f"/sbin/{tool}", str(Path(sys.executable).with_name(tool)))
    return shutil.which(tool) or next((p for p in places if os.path.exists(p)), None)
