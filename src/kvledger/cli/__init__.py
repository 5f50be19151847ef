"""The command-line interface (presentation layer), a thin shell over the Python API."""
