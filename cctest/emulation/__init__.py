"""The emulation engines a run boots: a virtme-ng VM on QEMU (vm.py) and this project's User-Mode
Linux build (uml.py, umlkernel.py, umlshare.py), behind one interface (engines.py)."""
