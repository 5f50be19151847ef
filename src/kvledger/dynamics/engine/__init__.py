"""The engine's rules, as vLLM v1 and SGLang run them: scheduling, the block pool, KV managers, the radix cache."""
