"""Validation against a real testbed: the peer suite's runs beside a published hardware table.

`cctest validate DIR...` (cli/validate.py) reads the runs (runs.py) and the stored table (testbed.py),
pairs BBR and CUBIC per cell and repetition (gains.py), and writes the page (page.py) with its
side-by-side heatmap (heatmap.py). The table is Cao et al., IMC 2019, Fig. 5, carried in
data/peer/cao2019/ with its source and licence; the suite is peer/cao2019.yaml.
"""
