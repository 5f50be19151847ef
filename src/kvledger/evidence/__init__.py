"""Evidence: readers of real benchmark outputs into RunRecords. Never imports the simulator."""
