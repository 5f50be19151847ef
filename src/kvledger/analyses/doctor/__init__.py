"""`kvledger doctor`: a vLLM log against the ledger, and start-ups replayed through the memory plan."""
