"""The congestion controls: which the kernel and this project have (projectccs.py), the modules'
sources and parameters (modsource.py, modparams.py), and their build, load and unload (kmod.py)."""
