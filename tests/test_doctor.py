"""Which kernel --vm boots by default."""

from __future__ import annotations

import os

from cctest import doctor


def test_the_distro_default_kernel_comes_first_whatever_its_date(tmp_path):
    old, new = tmp_path / "vmlinuz-6.1.0-56-amd64", tmp_path / "vmlinuz-6.12.117+deb12-amd64"
    for path, mtime in ((old, 1_000_000), (new, 2_000_000)):
        path.write_bytes(b"")
        os.utime(path, (mtime, mtime))
    assert doctor.order_kernels([old, new], "vmlinuz-6.1.0-56-amd64") == [old, new]
    # no metapackage (not Debian) or it names a kernel that is not installed: newest first
    assert doctor.order_kernels([old, new], None) == [new, old]
    assert doctor.order_kernels([old, new], "vmlinuz-6.19.0-1-amd64") == [new, old]
