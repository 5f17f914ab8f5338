"""Ships modules/ (the kernel module sources) inside the package as cctest._modules, so that an
installed wheel can build them (cctest/kernel/projectccs.py finds them there outside a checkout).
Everything else is in pyproject.toml; this file exists only because package-dir mapping of a
directory outside the package cannot be combined with `packages.find` there."""

from setuptools import find_packages, setup

setup(
    packages=find_packages(include=["cctest", "cctest.*"]) + ["cctest._modules"],
    package_dir={"cctest._modules": "modules"},
    package_data={"cctest._modules": ["README.md", "*/README.md", "*/Kbuild", "*/Makefile", "*/*.c", "*/*.h"]},
)
