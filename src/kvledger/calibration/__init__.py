"""Calibrating the simulator on measured runs (``kvledger calibrate``) and validating it against them (``kvledger
validate``): replay, fit, comparison, benchmark stages."""
