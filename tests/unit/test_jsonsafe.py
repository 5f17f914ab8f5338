"""One JSON-safe writer for every JSON file made from measured numbers."""

import json
import math

import numpy as np
from hypothesis import given, strategies as st

from cctest.base import jsonsafe

values = st.recursive(
    st.none() | st.booleans() | st.integers(-2**53, 2**53) | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=5) | st.floats(allow_nan=True).map(np.float64) | st.integers(-99, 99).map(np.int64),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=4), inner, max_size=4),
    max_leaves=20)


def test_nan_inf_and_numpy_become_plain_json():
    doc = {"a": math.nan, "b": [math.inf, -math.inf, np.float64("nan"), np.float32(1.5)], 3: np.int64(7),
           "c": np.bool_(True), "d": (1, "x")}
    assert json.loads(jsonsafe.dumps(doc)) == {"a": None, "b": [None, None, None, 1.5], "3": 7, "c": True,
                                               "d": [1, "x"]}


@given(values)
def test_any_nesting_of_measured_numbers_is_strict_json(value):
    text = jsonsafe.dumps(value)
    json.loads(text, parse_constant=lambda c: (_ for _ in ()).throw(ValueError(c)))  # no NaN/Infinity


def test_the_writers_use_it():
    """checks, summary and the figures' encoder go through json_safe; the near-copies are gone."""
    from cctest.analysis import checks, summary
    from cctest.report import build, html
    assert checks.json_safe is summary.json_safe is html.json_safe is jsonsafe.json_safe
    assert not hasattr(build, "_finite") and not hasattr(checks, "_clean") and not hasattr(summary, "_clean")
