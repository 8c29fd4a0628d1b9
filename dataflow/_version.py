"""The package version, in a module of its own: modules inside the package (state and file
metadata writers) and ``setup.cfg`` read it from here without importing the package root."""

__version__ = "0.1.0"
