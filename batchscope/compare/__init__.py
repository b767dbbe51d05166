"""Two runs side by side on one step clock: static vs continuous, or any two traces of one workload."""
