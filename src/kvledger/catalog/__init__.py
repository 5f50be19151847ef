"""Catalogs (bottom layer): model specs parsed from real config.json files, GPU specs, engine defaults."""
