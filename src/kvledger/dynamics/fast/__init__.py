"""Fast paths of the simulator: whole stretches of decode steps and arrivals at once, with the step loop's results."""
