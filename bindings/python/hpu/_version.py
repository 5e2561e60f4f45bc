"""The binding's version (it follows libhpu's)."""
__version__ = "0.2.0"
