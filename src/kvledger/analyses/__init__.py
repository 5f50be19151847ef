"""Analyses of the judgment calls serving engineers make (FP8 KV cache, speculative decoding, KV eviction), built on the ledgers.

This layer sits above accounting (memory plans, the roofline) and may drive the simulator
(dynamics); the evidence readers and the ledgers never import it. Each module computes its
answer for one model and GPU, shows the arithmetic, and names the regime where the answer flips.
"""
