"""What a simulated run reports: latency statistics, ITL gaps, KV usage over time, token times, step logs."""
