"""Ledgers: goodput and cost, computed from RunRecords (simulated or measured alike)."""
