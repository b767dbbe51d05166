"""What a run takes in: workloads (JSON), the shipped scenarios and run specs."""
