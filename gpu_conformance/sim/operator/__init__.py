"""The simulated GPU Operator: what an install creates, how its operands behave, its status, its faults."""
