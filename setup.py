"""Ships modules/ (the kernel module sources) inside the package as cctest._modules, so that an
installed wheel can build them (cctest/kernel/projectccs.py finds them there outside a checkout).
Everything else is in pyproject.toml; this file exists only because package-dir mapping of a
directory outside the package cannot be combined with `packages.find` there. Each folder of
modules/ is named as a package of its own: setuptools ships data only from the packages it is told."""

from setuptools import find_namespace_packages, find_packages, setup

SOURCES = ["README.md", "Kbuild", "Makefile", "*.c", "*.h"]
MODULE_FOLDERS = [f"cctest._modules.{name}" for name in find_namespace_packages(where="modules")]

setup(
    packages=find_packages(include=["cctest", "cctest.*"]) + ["cctest._modules", *MODULE_FOLDERS],
    package_dir={"cctest._modules": "modules"},
    package_data={"cctest._modules": ["README.md"], **{folder: SOURCES for folder in MODULE_FOLDERS}},
)
