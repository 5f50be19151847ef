"""Accounting: KV bytes, memory plans, step costs (roofline and calibrated). Depends only on catalogs and units."""
