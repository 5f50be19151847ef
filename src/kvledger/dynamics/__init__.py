"""Dynamics: workloads and the serving simulator. Depends on accounting, catalogs and records."""
