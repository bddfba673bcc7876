"""Programs to copy: each runs against the demo agent in the test suite."""
