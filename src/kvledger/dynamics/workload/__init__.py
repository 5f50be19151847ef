"""Where requests come from: bundled and user traces, synthetic and ServeGen workloads, closed loops."""
