"""The judgment calls: FP8 KV cache, speculative decoding, KV eviction, prefill/decode disaggregation."""
